"""What every benchmark here reports: percentiles by the nearest rank, p50 and p95 of a list of timings."""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]
