"""Model calls: providers, the governed client, prices and budgets."""
