"""After the first screen, a worker makes what the first keys ask for: the time-travel index
and the actions that carry a stack (a pass over every event, asked by the inspector for the
first event without a stack)."""

from __future__ import annotations

from pathlib import Path

from tests.tui.helpers import make_app, ready, settle

SAMPLE = Path(__file__).parents[2] / "sample_snapshots" / "train_linear_adam.pickle.xz"


async def test_the_worker_after_the_first_screen_readies_the_first_keys():
    app = make_app(SAMPLE)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await ready(app, pilot)
        await settle(app, pilot)
        view = screen.current_view
        assert view.replayer.indexed
        assert "actions_with_stacks" in vars(view.device)
