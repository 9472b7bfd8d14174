# Helpers for the rules: input functions and wildcard constraints. Imports nothing heavy.


wildcard_constraints:
    source=r"[A-Za-z0-9_.-]+",
    keep=r"\d+",


def surgery_tables():
    s = config["surgery"]
    return expand(
        "results/surgery/{source}_keep{keep}.md", source=s["sources"], keep=s["keep"]
    )
