"""Graph -> graph passes."""
