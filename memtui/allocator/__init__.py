"""A model of PyTorch's CUDA caching allocator, to replay a recording's requests under other
settings (docs/whatif.md). Pure: it knows requests, not snapshots."""
