"""Per-image features computed once and cached."""


def test_image_progress_is_one_line_outside_a_terminal(capsys, tmp_path):
    """Computing per-image features says once what it computes and where it caches; the
    counts every tenth of the way are for terminals (a docs build or a log gets one line)."""
    from pmap_sklearn.datasets._images import cached_map

    jobs = [(i,) for i in range(30)]
    assert cached_map(abs, jobs, str(tmp_path), 1, "features") == list(range(30))
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"features of 30 images, cached in {tmp_path}"]
    assert cached_map(abs, jobs, str(tmp_path), 1, "features") == list(range(30))
    assert capsys.readouterr().err == ""  # all cached: nothing to say
