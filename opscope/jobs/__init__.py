"""Jobs spread over worker processes or a Dask cluster: one executor for every parallel job
opscope runs, each job's result written as its own atomic shard under a stable id, merged in order."""
