"""`tunelab track`: the lab written into MLflow, where a team already looks at its runs.

One MLflow run per tunelab run (params: the resolved spec, flattened; metrics: the loss history
by step and the validation metrics; tags: run id, parent, state, data version, verdict;
artifact: record.json), and one `lab` run holding the lab report and the comparison records.
Tracking again adds only what MLflow lacks: a run is found by its `tunelab.run_id` tag, a
metric point by its step, an artifact by the sha256 its tag holds.

- `uri`: which MLflow store (the default: `sqlite:///LAB/mlflow.db`), and the client for it;
- `content`: what a run or the lab puts into MLflow, read from the store (no MLflow here);
- `names`: names and values as MLflow takes them (params, metric keys, times);
- `sync`: writing one MLflow run so that it holds that, and nothing twice;
- `track`: the stage, lab to experiment.
"""
