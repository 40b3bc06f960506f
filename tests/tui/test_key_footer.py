"""The footer is built again only when the keys it shows change (memtui/tui/widgets/key_footer.py),
and always shows the screen's keys: those of the widget with the focus among them."""

from __future__ import annotations

from textual.widgets._footer import FooterKey

from memtui.tui.widgets.key_footer import KeyFooter
from tests.tui.helpers import make_app, ready, settle, tiny_path


def _shown(footer: KeyFooter) -> list[str]:
    return [key.key for key in footer.query(FooterKey)]


def _expected(screen) -> list[str]:
    """The keys shown, then the command palette's on the right."""
    palette = screen.app.COMMAND_PALETTE_BINDING
    return [key for key, active in screen.active_bindings.items() if active.binding.show and key != palette] + [
        palette]


async def test_the_footer_shows_the_keys_and_skips_a_rebuild_with_nothing_new():
    app = make_app(tiny_path())
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await ready(app, pilot)
        await settle(app, pilot)
        await pilot.pause(0.1)
        footer = screen.query_one(KeyFooter)
        built = list(footer.query(FooterKey))
        assert built and _shown(footer) == _expected(screen)
        await footer.recompose()  # the same keys: what was built stays
        assert list(footer.query(FooterKey)) == built
        await pilot.press("slash")  # the search bar has the focus, and a key of its own
        await settle(app, pilot)
        await pilot.pause(0.1)
        assert "escape" in _shown(footer) and _shown(footer) == _expected(screen)
        await pilot.press("escape")
        await settle(app, pilot)
        await pilot.pause(0.1)
        assert "escape" not in _shown(footer) and _shown(footer) == _expected(screen)
