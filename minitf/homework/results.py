"""What a grading says: the table of exercises and scores, the failing exercises' full reports,
and Gradescope's results.json. minitf.homework.autograde grades; this only reports.
"""
from __future__ import annotations

from minitf.homework.autograde import Outcome


def _verdict(outcome: Outcome) -> str:
    result = outcome.result
    if result.passed:
        return "passed"
    if outcome.file_verdict:            # its file: missing, unreadable (not UTF-8), a link
        return outcome.file_verdict
    if result.kind:                     # a stub that raised, or the grading's --budget ran out
        return result.kind
    return "error" if result.stopped and not result.rows else "failed"


def _at(outcome: Outcome) -> str:
    """", first at line 12" for a file edited outside its regions, where that is known."""
    return f", first at {outcome.edited_at}" if outcome.edited_at else ""


def table(outcomes: list[Outcome]) -> str:
    """One row per exercise: tensors within tolerance, verdict, score, seconds; then the total."""
    header = ("exercise", "tensors ok", "result", "score", "seconds")
    rows = [(o.name, f"{sum(r.passed for r in o.result.rows)}/{len(o.result.rows)}",
             _verdict(o) + (f" (file edited outside its regions{_at(o)})" if o.edited else ""),
             f"{o.score:g}/{o.points:g}", f"{o.seconds:.1f}") for o in outcomes]
    widths = [max(len(c) for c in column) for column in zip(header, *rows)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
             for row in [header, tuple("-" * w for w in widths), *rows]]
    total = sum(o.score for o in outcomes)
    return "\n".join(lines + ["", f"score {total:g} of {sum(o.points for o in outcomes):g} "
                                  f"({sum(o.seconds for o in outcomes):.1f} s)"])


def failing_reports(outcomes: list[Outcome]) -> str:
    """The full report of every exercise that ran and failed (the worst entry, both values, the
    hint), so a student grading their own folder sees what to fix, not only a verdict."""
    return "\n\n".join(o.report for o in outcomes          # a blank's report says only that
                        if not o.result.passed and _verdict(o) != "not written")


def gradescope_test(outcome: Outcome) -> dict:
    """One exercise as a test of Gradescope's results.json: its score, and its report (with what
    the student's code printed) as the output the student reads."""
    o = outcome
    return {"name": o.name, "score": o.score, "max_score": o.points,
            "status": "passed" if o.result.passed else "failed",
            "output": o.report + (f"\n\nthis file was edited outside its solution "
                                  f"regions{_at(o)}" if o.edited else "") +
            (f"\n\nyour code printed, while it was graded:\n{o.printed}" if o.printed else "") +
            (f"\n\nyour code wrote to standard error (warnings among it), while it was graded:"
             f"\n{o.warned}" if o.warned else "")}


def gradescope_results(tests: list[dict], seconds: float, note: str = "") -> dict:
    """Gradescope's results.json around its tests: the total score, the time, a summary line."""
    # rounded: points of 0.1 and 0.2 summed to 0.30000000000000004 in the file a student reads
    return {"score": round(sum(t["score"] for t in tests), 6),
            "execution_time": round(seconds),
            "output": f"{len(tests)} exercise{'s' * (len(tests) != 1)}, each graded on its own "
                      f"by minitf's gradient checks" + note,
            # plain text, shown as written: Gradescope's default for the summary above renders
            # HTML, which would hide any "<...>" in it (a traceback's "<module>"); the tests'
            # default is text already, stated here so that no assignment setting changes it
            "output_format": "text", "test_output_format": "text",
            "tests": tests}


def gradescope(outcomes: list[Outcome]) -> dict:
    """Gradescope's results.json: a test per exercise (its report as the output), the total."""
    return gradescope_results([gradescope_test(o) for o in outcomes],
                              sum(o.seconds for o in outcomes))
