DROP TABLE usage_batches;
