"""Tables written as text through the privacy filter: CSV, TSV and semicolon lines, markdown and box
tables, and columns aligned by spaces, anywhere in a tool's text (prose around them stays as it was).

A row is a header when one of its cells names private data; the rows after it with as many cells (a
separator line between is allowed) are its table, and each has the cells of those columns replaced by
:data:`~baton.subagents.tables.FILTERED`. Only the rows that change are rewritten.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator

from baton.subagents.tables import FILTERED, Private, Removed, names_private, row_label

#: Lines of a pipe table that only draw (``|---|:--:|``, ``+----+``, ``├───┼───┤``).
RULE_LINE = re.compile(r"^[\s|│┃:+\-=─━┄┈┼╪╫╋├┤┬┴┌┐└┘╞╡╒╕╘╛╭╮╯╰]*$")

#: What separates the cells of a pipe table: ``|`` (not escaped) and the box-drawing bars.
PIPE = re.compile(r"(?<!\\)[|│┃]")

#: Columns aligned by spaces (``tabulate``, pandas, a CLI's table): two spaces or more between cells.
ALIGNED = re.compile(r"( {2,})")


def filter_text(text: str, private: Private, removed: Removed) -> str:
    """``text`` with the private columns of every table in it filtered (``text`` itself if none)."""
    if "<t" in text.lower():
        text = _html_tables(text, private, removed)
    if "\n" not in text.strip():
        return text
    lines = text.split("\n")
    changed = _pipe_tables(lines, private, removed)
    for delimiter in (",", "\t", ";"):
        changed = _delimited(lines, delimiter, private, removed) or changed
    changed = _aligned(lines, private, removed) or changed
    return "\n".join(lines) if changed else text


class _Table:
    """The header a run of rows is under: its width and the columns it hides."""

    def __init__(self) -> None:
        self.width = 0
        self.hidden: set[int] = set()
        self.rows = 0

    def reset(self) -> None:
        """Out of any table (a blank line, a line that is no row)."""
        self.width, self.hidden, self.rows = 0, set(), 0

    def row(self, cells: list[str], private: Private, indexed: bool = False) -> set[int]:
        """The cells of ``cells`` to hide; a cell naming private data starts (or adds to) a header.

        ``indexed``: a row may carry one more cell on the left than its header, a number (pandas)."""
        hide: set[int] = set()
        extra = len(cells) - self.width
        if self.hidden and indexed and extra == 1 and cells[0].strip().isdigit():
            hide = {i + 1 for i in self.hidden}
        elif self.hidden:
            # more cells than the header: a delimiter inside a value moved the private cell right by up
            # to ``extra``; fewer: a ragged row, as far as it goes
            hide = {i + k for i in self.hidden for k in range(max(extra, 0) + 1) if i + k < len(cells)}
        labelled = row_label(cells, private, self.rows)
        hide |= labelled
        self.rows += 1
        names = {
            i
            for i, cell in enumerate(cells)
            if i not in hide
            and len(cells) >= 2
            and names_private(cell, private)
            and not (labelled and i == 0 and self.rows > 1)
        }
        if names:
            if not hide:
                self.width, self.hidden = len(cells), set()
            self.hidden |= {min(i, self.width - 1) for i in names}
        return hide


def _pipe_tables(lines: list[str], private: Private, removed: Removed) -> bool:
    """Markdown, psql and box tables: cells between bars."""
    table, changed = _Table(), False
    for number, line in enumerate(lines):
        if not line.strip():
            table.reset()
            continue
        if RULE_LINE.match(line):
            continue  # |---|---| under a markdown header, +----+ or ├───┼ between rows
        if not PIPE.search(line):
            table.reset()
            continue
        segments = PIPE.split(line)
        first = 1 if not segments[0].strip() else 0
        last = len(segments) - 1 if len(segments) > 1 and not segments[-1].strip() else len(segments)
        cells = [s.strip() for s in segments[first:last]]
        for index in table.row(cells, private):
            if index < len(cells) and cells[index] and FILTERED not in cells[index]:
                removed.take(cells[index])
                segments[first + index] = f" {FILTERED} "
                changed = True
        lines[number] = _rejoin(line, segments)
    return changed


def _rejoin(line: str, segments: list[str]) -> str:
    """The line's segments joined again with the bars they were split at."""
    bars = PIPE.findall(line)
    out = segments[0]
    for bar, segment in zip(bars, segments[1:], strict=True):
        out += bar + segment
    return out


def _records(lines: list[str], delimiter: str) -> Iterator[tuple[int, int, list[str]]]:
    """Each CSV record of ``lines``: its first line, the line after it, its cells."""
    reader = csv.reader((line + "\n" for line in lines), delimiter=delimiter, strict=False)
    start = 0
    try:
        for cells in reader:
            yield start, reader.line_num, cells
            start = reader.line_num
    except csv.Error:
        return


def _delimited(lines: list[str], delimiter: str, private: Private, removed: Removed) -> bool:
    """CSV, TSV or semicolon-separated lines, quoted fields and all."""
    if not any(delimiter in line for line in lines):
        return False
    table, rewrites = _Table(), []
    for start, end, cells in _records(lines, delimiter):
        if len(cells) < 2:
            table.reset()
            continue
        hide = {i for i in table.row([c.strip() for c in cells], private) if _hideable(cells[i])}
        if hide:
            rewrites.append((start, end, [removed.take(c) if i in hide else c for i, c in enumerate(cells)]))
    for start, end, cells in reversed(rewrites):
        out = io.StringIO()
        csv.writer(out, delimiter=delimiter, lineterminator="").writerow(cells)
        ending = "\r" if lines[end - 1].endswith("\r") else ""
        lines[start:end] = [out.getvalue() + ending]
    return bool(rewrites)


def _aligned(lines: list[str], private: Private, removed: Removed) -> bool:
    """Columns aligned by spaces; a data row may carry one more cell on the left (an index)."""
    table, changed = _Table(), False
    for number, line in enumerate(lines):
        indent = line[: len(line) - len(line.lstrip(" "))]
        parts = ALIGNED.split(line.strip(" \r"))
        cells = parts[0::2]
        if line.strip() and RULE_LINE.match(line):
            continue  # ------  ------- under the header
        if len(cells) < 2 or PIPE.search(line):
            table.reset()  # not aligned columns (pipe tables are the pipe pass's)
            continue
        hide = {i for i in table.row(cells, private, indexed=True) if _hideable(cells[i])}
        for index in hide:
            removed.take(cells[index])
            parts[2 * index] = FILTERED
        if hide:
            lines[number] = indent + "".join(parts) + ("\r" if line.endswith("\r") else "")
            changed = True
    return changed


def _hideable(cell: str) -> bool:
    """Whether a cell holds something to hide (not empty, not already filtered)."""
    return bool(cell.strip()) and FILTERED not in cell


HTML_TABLE = re.compile(r"(?is)<table\b.*?</table>")
HTML_ROW = re.compile(r"(?is)<tr\b.*?</tr>")
HTML_CELL = re.compile(r"(?is)(<t[hd]\b[^>]*>)(.*?)(</t[hd]>)")
HTML_TAG = re.compile(r"<[^>]+>")


def _html_tables(text: str, private: Private, removed: Removed) -> str:
    """HTML tables: the cells under a header cell naming private data."""

    def table(match: re.Match[str]) -> str:
        state = _Table()

        def row(found: re.Match[str]) -> str:
            cells = list(HTML_CELL.finditer(found.group(0)))
            hide = state.row([HTML_TAG.sub("", c.group(2)).strip() for c in cells], private)
            if not hide:
                return found.group(0)
            out, last = "", 0
            for index, cell in enumerate(cells):
                out += found.group(0)[last : cell.start()]
                inner = cell.group(2)
                if index in hide and inner.strip() and FILTERED not in inner:
                    removed.take(HTML_TAG.sub("", inner).strip())
                    inner = FILTERED
                out += cell.group(1) + inner + cell.group(3)
                last = cell.end()
            return out + found.group(0)[last:]

        return HTML_ROW.sub(row, match.group(0))

    return HTML_TABLE.sub(table, text)
