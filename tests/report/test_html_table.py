"""The tables' HTML view: the number a cell sorts by, the page's parts."""

from __future__ import annotations

from fedbench.report.html_table import html_table, sort_value


def test_sort_value_is_the_number_a_cell_starts_with():
    assert sort_value("71.00 ± 4.24 (n=2)") == 71.0
    assert sort_value("-3.80") == -3.8 and sort_value("+1.21") == 1.21
    assert sort_value("74.80 (1.20)") == 74.8
    assert sort_value("—") is None and sort_value("diverged (round 12)") is None


def test_page_with_groups_and_without():
    rows = [["A", "1.00", "2.00 (n=1)", "+1.00"], ["B", "—", "diverged (round 3)", "—"]]
    grouped = html_table("t", [("Scale", "quick")], ["MNIST"], ["", "paper", "ours", "Δ"], rows)
    assert '<tr><th></th><th colspan="3">MNIST</th></tr>' in grouped
    assert "<li>Scale: quick</li>" in grouped
    assert (
        '<td data-v="2.0">2.00 (n=1)</td>' in grouped and "<td>diverged (round 3)</td>" in grouped
    )
    assert "<td>A</td>" in grouped  # row labels sort as text
    flat = html_table("t", [], None, ["", "MNIST"], [["A", "1.00"]])
    assert "colspan" not in flat and '<th scope="col">MNIST</th>' in flat
