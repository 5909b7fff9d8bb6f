"""The end of `arena train`: a summary of the run and its learning curve."""

from training.summary import summary_lines, write_curve


def test_a_run_ends_with_its_summary_and_curve(tmp_path):
    run = tmp_path / "smac" / "3m-v0" / "qmix" / "r"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "latest").write_text("iter_000003")
    rows = [
        "iteration,env_steps,time_s,episode_return_mean,win_rate,test_battle_won_mean",
        "1,2000,60,4.5,0.0,0.25",
        "2,4000,120,9.5,0.1,nan",
        "3,6000,180,7.0,0.2,0.5",
    ]
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    png = write_curve(run)
    assert png == run / "curve.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = "\n".join(summary_lines(run))
    assert f"run: {run}" in text and "3 iterations, 6,000 env steps, 3.0 min" in text
    assert "final 7.00, best 9.50 (at 4,000 env steps)" in text
    assert "greedy test win rate: final 50.0%, best 50.0%" in text
    assert "latest: iter_000003" in text and f"arena eval {run}" in text


def test_a_run_without_rows_says_only_where_it_is(tmp_path):
    assert summary_lines(tmp_path) == [f"run: {tmp_path}"] and write_curve(tmp_path) is None
