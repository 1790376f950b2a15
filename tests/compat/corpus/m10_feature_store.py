"""Feature store: a feature set (out of runplane's scope)."""
import mlrun.feature_store as fstore

fset = fstore.FeatureSet("stocks", entities=[fstore.Entity("ticker")])
