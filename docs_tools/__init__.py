"""Tools that build parts of the documentation (figures) from real PyTorch runs."""
