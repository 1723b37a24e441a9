"""Homework: an instructor's loop around the exercises.

    minitf homework make --exercises A,B --out hw1/     a student directory: minitf, A and B blank
    minitf homework make --file my_ops.py --out hw2/    the same for an instructor's own file
    minitf homework grade hw1/ [--json results.json]    grade each exercise on its own
    minitf homework autograder hw1/ --out hw1.zip       the same grading as a Gradescope autograder

    regions   the solution regions (# BEGIN SOLUTION / # END SOLUTION) and the edits that blank them
    handout   the student directory (make)
    autograde the grader (grade)
    results   what a grading says: its table, the failing reports, Gradescope's results.json
    graded_by the registry cases that grade each exercise, fixed when the homework is made
    points    what each exercise is worth (make --points; 1 by default), all or nothing
    printed   what a submission prints while graded: to the terminal, and kept for results.json
    guard     the reference's solution files, which the code graded may not open
    journal   a results.json written before each exercise, so a crash costs one (--resume)
    autograder the autograder zip (setup.sh, run_autograder, the reference that grades)
    submission a student's files in a submission folder or zip: found, unpacked, refused
    writing   what make, autograder and exercise start write: OS errors named, no half
              a folder left behind
"""
from minitf.homework.autograde import Outcome, grade, manifest
from minitf.homework.results import failing_reports, gradescope, table
from minitf.homework.handout import MANIFEST, make, plan
from minitf.homework.regions import find_regions, restore

__all__ = ["Outcome", "failing_reports", "gradescope", "grade", "manifest", "table", "MANIFEST", "make", "plan",
           "find_regions", "restore"]
