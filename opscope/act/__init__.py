"""Acting on what was found, with proof: rewrites compared op by op with the original
(`parity`) and measured end to end on real data (`whatif`)."""
