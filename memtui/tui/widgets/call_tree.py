"""The live set as a call tree (memray's tree reporter, for one moment of a CUDA trace).

A line-API scroll view over the expanded nodes of a :class:`memtui.analysis.live_tree.TreeNode`
tree: each row has the bytes, share and count under it, a small bar of its category mix
and its frame. Expanded and selected nodes are remembered by their path of frames, so they
stay put when the tree is rebuilt for another event.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memtui.analysis.live_tree import TreeNode
from memtui.tui.views.stacked_plot import CATEGORY_COLOURS, category_css
from memtui.tui.widgets.pass_style import PassStyle
from memtui.units import format_bytes

MIX_CELLS = 6
Path = tuple[int, ...]


class CallTree(PassStyle, ScrollView, can_focus=True):
    DEFAULT_CSS = """
    CallTree {
        overflow-y: auto;
        overflow-x: auto;
        & > .call-tree--cursor { background: $accent 40%; text-style: bold; }
        & > .call-tree--muted { color: $text-muted; }
        & > .call-tree--match { color: $warning; text-style: bold; }
    }
    """ + category_css("CallTree", "call-tree--category")
    COMPONENT_CLASSES = {"call-tree--cursor", "call-tree--muted", "call-tree--match"} | {
        f"call-tree--category-{k}" for k in range(len(CATEGORY_COLOURS))}
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "move(-1000000000)", "First", show=False),
        Binding("end,G", "move(1000000000)", "Last", show=False),
        Binding("left,h", "collapse", "Collapse / parent", show=False),
        Binding("right,l", "expand", "Expand / first child", show=False),
        Binding("enter,space", "toggle", "Expand/collapse"),
        Binding("e", "expand_all", "Expand all under it"),
        Binding("f", "focus_node", "Focus on node"),
        Binding("u", "unfocus", "Whole tree", show=False),
        Binding("i", "toggle_internal", "Internal frames"),
        Binding("slash", "search", "Search frames"),
        Binding("n", "next_match(True)", "Next match", show=False),
        Binding("N", "next_match(False)", "Previous match", show=False),
    ]

    class InternalToggled(Message):
        """The tree should be folded again with internal frames shown (or hidden)."""

        def __init__(self, show: bool) -> None:
            super().__init__()
            self.show = show

    class SearchRequested(Message):
        """`/`: the screen asks for the text to search."""

    class NodeSelected(Message):
        """The cursor is on another node."""

        def __init__(self, node: TreeNode) -> None:
            super().__init__()
            self.node = node

        def can_replace(self, message: Message) -> bool:
            return type(message) is type(self)

    class Status(Message):
        """What the last key did, for the screen's status line."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def _tell(self, text: str) -> None:
        self.message = text
        self.post_message(self.Status(text))

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.root: TreeNode | None = None
        self.names: list[str] = []
        self.show_internal = False
        self._expanded: set[Path] = set()
        self._focus: Path = ()
        self._selected: Path = ()
        self._rows: list[tuple[TreeNode, int, Path]] = []
        self._cursor = 0
        self._query = ""
        self._matches: list[Path] = []
        self.message = ""  # what the last key did, for the screen's status line
        self._reset = False  # the next tree opens its hot path again (frames changed)

    # -- content --------------------------------------------------------------------------
    def set_tree(self, root: TreeNode, names: list[str]) -> None:
        """Show ``root``, keeping expanded, focused and selected nodes that still exist."""
        fresh = self.root is None or self._reset
        self._reset = False
        self.root, self.names = root, names
        if fresh:
            self._expanded = {()} | set(_hot_path(root))
        if self._find(root, self._focus) is None:
            self._focus = ()
        if self._query:
            self._matches = self._search_paths(self._query)
        self._rebuild()

    @property
    def selected(self) -> TreeNode | None:
        return self._rows[self._cursor][0] if self._rows else None

    @property
    def text(self) -> str:
        """Every shown row as plain text (for tests)."""
        return "\n".join("".join(t for t, _ in self._row_parts(k)) for k in range(len(self._rows)))

    def _find(self, root: TreeNode, path: Path) -> TreeNode | None:
        node = root
        for key in path:
            node = next((c for c in node.children if c.key == key), None)
            if node is None:
                return None
        return node

    def _focus_node(self) -> TreeNode | None:
        return self._find(self.root, self._focus) if self.root is not None else None

    def _rebuild(self) -> None:
        rows: list[tuple[TreeNode, int, Path]] = []
        top = self._focus_node()
        if top is not None:
            stack = [(top, 0, self._focus)]
            while stack:
                node, depth, path = stack.pop()
                rows.append((node, depth, path))
                if path in self._expanded:
                    for child in reversed(node.children):
                        stack.append((child, depth + 1, path + (child.key,)))
        self._rows = rows
        paths = [p for _, _, p in rows]
        if self._selected in paths:
            self._cursor = paths.index(self._selected)
        else:
            # The nearest shown ancestor of the node that was selected.
            prefix = self._selected
            while prefix and prefix not in paths:
                prefix = prefix[:-1]
            self._cursor = paths.index(prefix) if prefix in paths else 0
        self._selected = paths[self._cursor] if paths else ()
        width = max((sum(len(t) for t, _ in self._row_parts(k)) for k in range(len(rows))), default=0)
        self.virtual_size = Size(width + 1, len(rows))
        self._scroll_to_cursor()
        self.refresh()

    # -- drawing ----------------------------------------------------------------------------
    def _row_parts(self, k: int) -> list[tuple[str, object]]:
        """Figures first, in fixed columns, then the frame indented by its depth: a deep stack
        pushes only its own name to the right."""
        node, depth, path = self._rows[k]
        top = self._focus_node()
        total = max(top.bytes if top is not None else 1, 1)
        marker = ("▾ " if path in self._expanded else "▸ ") if node.children else "  "
        parts: list[tuple[str, object]] = [
            (f"{format_bytes(node.bytes):>10} {100 * node.bytes / total:5.1f}% {node.count:>6,} ", None)]
        parts += _mix_cells(node)
        parts.append((" " + " " * depth + marker, "muted"))
        parts.append((node.label, "match" if path in self._matches else None))
        return parts

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        k = scroll_y + y
        if not 0 <= k < len(self._rows):
            return Strip.blank(width, self.base_style)
        base = self.get_component_rich_style("call-tree--cursor") if k == self._cursor and self.has_focus else \
            (Style(reverse=True) if k == self._cursor else Style())
        segments = []
        for text, style in self._row_parts(k):
            if isinstance(style, tuple):
                colour = self.get_component_rich_style(
                    f"call-tree--category-{min(style[1], len(CATEGORY_COLOURS) - 1)}").color
                segments.append(Segment(text, self.base_style + Style(color=colour)))
            else:
                rich = self.get_component_rich_style(f"call-tree--{style}") if style else self.base_style
                segments.append(Segment(text, rich + base if k == self._cursor else rich))
        strip = Strip(segments)
        return strip.crop_extend(scroll_x, scroll_x + width, self.base_style + base if k == self._cursor else
                                 self.base_style)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def _scroll_to_cursor(self) -> None:
        height = max(self.scrollable_content_region.height, 1)
        y = self.scroll_offset.y
        if self._cursor < y:
            self.scroll_to(y=self._cursor, animate=False)
        elif self._cursor >= y + height:
            self.scroll_to(y=self._cursor - height + 1, animate=False)

    # -- keys ---------------------------------------------------------------------------------
    def _select(self, k: int) -> None:
        if not self._rows:
            return
        self._cursor = max(0, min(k, len(self._rows) - 1))
        self._selected = self._rows[self._cursor][2]
        self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.NodeSelected(self._rows[self._cursor][0]))

    def action_move(self, delta: int) -> None:
        self._select(self._cursor + delta)

    def action_page(self, direction: int) -> None:
        self._select(self._cursor + direction * max(self.scrollable_content_region.height - 1, 1))

    def action_toggle(self) -> None:
        node = self.selected
        if node is None or not node.children:
            return
        path = self._selected
        self._expanded.symmetric_difference_update({path})
        self._rebuild()

    def action_expand(self) -> None:
        node = self.selected
        if node is None or not node.children:
            return
        if self._selected in self._expanded:
            self._select(self._cursor + 1)
        else:
            self._expanded.add(self._selected)
            self._rebuild()

    def action_collapse(self) -> None:
        if self._selected in self._expanded and self.selected is not None and self.selected.children:
            self._expanded.discard(self._selected)
            self._rebuild()
        elif len(self._selected) > len(self._focus):
            self._selected = self._selected[:-1]
            self._rebuild()

    def action_expand_all(self) -> None:
        node = self.selected
        if node is None:
            return
        for child, path in _descendants(node, self._selected):
            if child.children:
                self._expanded.add(path)
        self._rebuild()

    def action_focus_node(self) -> None:
        node = self.selected
        if node is None:
            return
        self._focus = self._selected
        self._expanded.add(self._focus)
        self._tell(f"focused on {node.label} (u: whole tree)")
        self._rebuild()

    def action_unfocus(self) -> None:
        self._focus = ()
        self._tell("the whole tree")
        self._rebuild()

    def action_toggle_internal(self) -> None:
        self.show_internal = not self.show_internal
        self._reset = True
        self._focus = ()
        self._tell("internal frames " + ("shown" if self.show_internal else "hidden"))
        self.post_message(self.InternalToggled(self.show_internal))

    def action_search(self) -> None:
        self.post_message(self.SearchRequested())

    def search(self, query: str) -> int:
        """Select the first node whose frame contains ``query`` (any case) after the cursor,
        opening its ancestors; the number of nodes that match."""
        self._query = query.strip()
        self._matches = self._search_paths(self._query) if self._query else []
        if self._matches:
            self._go_to_match(True)
        self._tell(f"{len(self._matches)} frame{'s' if len(self._matches) != 1 else ''} match {self._query!r}"
                   if self._query else "")
        self._rebuild()
        return len(self._matches)

    def action_next_match(self, forward: bool) -> None:
        if not self._matches:
            self._tell("no search: / searches frames")
            return
        self._go_to_match(forward)
        self._rebuild()

    def _go_to_match(self, forward: bool) -> None:
        order = self._matches
        if self._selected in order:
            k = order.index(self._selected) + (1 if forward else -1)
        else:
            k = 0 if forward else len(order) - 1
        target = order[k % len(order)]
        for n in range(len(self._focus), len(target)):
            self._expanded.add(target[:n])
        self._selected = target
        self._tell(f"match {order.index(target) + 1} of {len(order)} for {self._query!r}")

    def _search_paths(self, query: str) -> list[Path]:
        top = self._focus_node()
        if top is None:
            return []
        wanted = query.lower()
        return [path for node, path in _descendants(top, self._focus) if wanted in node.label.lower()
                and path != self._focus]


def _descendants(node: TreeNode, path: Path):
    """(node, path) for ``node`` and everything under it, depth first, largest child first."""
    stack = [(node, path)]
    while stack:
        current, p = stack.pop()
        yield current, p
        for child in reversed(current.children):
            stack.append((child, p + (child.key,)))


def _hot_path(root: TreeNode) -> list[Path]:
    """The paths to open at first: down the largest child while it holds most of its parent."""
    out, node, path = [], root, ()
    while node.children and node.children[0].bytes * 2 >= node.bytes and len(out) < 200:
        node = node.children[0]
        path = path + (node.key,)
        out.append(path)
    return out


def _mix_cells(node: TreeNode) -> list[tuple[str, object]]:
    """A bar of MIX_CELLS cells, each the category holding the bytes at its middle."""
    cats = node.categories
    if cats is None or not node.bytes:
        return [(" " * MIX_CELLS, None)]
    cum = cats.cumsum()
    cells = []
    for c in range(MIX_CELLS):
        middle = (c + 0.5) / MIX_CELLS * node.bytes
        k = int((cum <= middle).sum())
        cells.append(("▇", ("category", min(k, len(cats) - 1))))
    return cells
