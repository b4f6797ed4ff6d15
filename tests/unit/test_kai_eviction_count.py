"""KAI's eviction counter, counted from its raw samples: a scheduler restart mid-run (a reconfiguration,
a process fault) resets it, and a difference of two instants went negative ("reclaim -22")."""

from kailab.stacks.kai.metrics import counted


def test_a_counter_that_only_rises_counts_its_rise_after_the_start():
    assert counted([(90.0, 3.0), (100.0, 3.0), (110.0, 5.0), (120.0, 8.0)], start=100.0) == 5


def test_a_counter_first_seen_during_the_run_counts_from_zero():
    assert counted([(110.0, 4.0), (120.0, 6.0)], start=100.0) == 6


def test_a_reset_counts_on_from_zero_instead_of_going_negative():
    # 22 before the run; 8 more; the scheduler restarts; 2 after the restart
    samples = [(95.0, 22.0), (105.0, 26.0), (110.0, 30.0), (130.0, 1.0), (140.0, 2.0)]
    assert counted(samples, start=100.0) == 8 + 2


def test_nothing_after_the_start_counts_nothing():
    assert counted([(80.0, 7.0), (90.0, 7.0)], start=100.0) == 0
    assert counted([], start=100.0) == 0
