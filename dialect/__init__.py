"""The `opscope` dialect: what is recorded (`ops`) and how it is computed (`lowering`)."""

from opscope.dialect.ops import ROLES, STAT_KINDS, StatOp, irdl_path, stat, verify_stat

__all__ = ["ROLES", "STAT_KINDS", "StatOp", "irdl_path", "stat", "verify_stat"]
