"""diffapp's package (app.py): its path relative to the checkout is what
`strata diff` matches across two checkouts."""
