"""The tidy table, the contract between recording and mining: the crash-safe CSV writer
(with its `site,flops` sidecar and Parquet export) and the typed reader.
"""
