"""What every stage stands on: the spec, the store, the ledger of runs, the lab, the environment."""
