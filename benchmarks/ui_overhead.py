"""Decode speed with the app open and every panel live vs the engine client alone.

Same model (the bundled one), preset, prompt and sampling; the two set-ups alternate,
each run on a fresh engine load. The app runs headless (Textual's run_test) at 160x48 so all
four panels draw while tokens stream, with the real telemetry sampler at 2 Hz. Figures are
llama.cpp's own decode rate (TurnFinished.decode_tps). Target: app/alone >= 0.95.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

import psutil

from workbench.core.config.presets import load_preset
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished
from workbench.core.paths import bundled_model_path

PROMPT = "Write a long story about a robot who learns to cook, with many details."
SYSTEM = "You are a helpful assistant."


def engine_cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def client_alone(preset_name: str, sampling: Sampling) -> tuple[TurnFinished, float]:
    """The turn's stats and the engine process's CPU seconds over it."""
    client = EngineClient()
    try:
        client.load_blocking(bundled_model_path(), load_preset(preset_name))
        messages = [ChatMessage("system", SYSTEM), ChatMessage("user", PROMPT)]
        before = engine_cpu_s(client.pid)
        finished = [event for event in client.chat(messages, sampling) if isinstance(event, TurnFinished)]
        return finished[-1], engine_cpu_s(client.pid) - before
    finally:
        client.close()


async def in_app(preset_name: str, sampling: Sampling) -> tuple[TurnFinished, float, float, float]:
    """The turn's stats, the UI process's CPU and wall seconds and the engine's CPU seconds over the turn."""
    from workbench.ui.app import WorkbenchApp
    from workbench.ui.engine_session import GENERATING, LOADED
    from workbench.ui.selection import Selection
    from workbench.ui.widgets.prompt_input import PromptInput

    app = WorkbenchApp(Selection(model_path=bundled_model_path(), preset_name=preset_name, device_name="host"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen

        async def until(condition, limit_s=300.0):
            deadline = time.monotonic() + limit_s
            while not condition():
                if time.monotonic() > deadline:
                    raise RuntimeError("the app did not get there in time")
                await asyncio.sleep(0.05)  # not pilot.pause: that forces a repaint the app would not do

        await until(lambda: screen.ledger is not None)
        screen.conversation.system_prompt = SYSTEM
        screen.conversation.sampling = sampling
        await pilot.press("ctrl+l")
        await until(lambda: screen.phase == LOADED)
        screen.query_one(PromptInput).value = PROMPT
        engine_start = engine_cpu_s(screen.engine.pid)
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        await pilot.press("enter")
        await until(lambda: screen.phase == GENERATING)
        await until(lambda: screen.phase == LOADED)
        cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
        return screen.conversation.stats[1], cpu, wall, engine_cpu_s(screen.engine.pid) - engine_start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each set-up, alternating")
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--preset", default="as-is")
    args = parser.parse_args()
    sampling = Sampling(temperature=0.0, seed=1, max_tokens=args.tokens)
    alone, app, ui_share, alone_engine_cpu, app_engine_cpu = [], [], [], [], []
    for run in range(args.runs):
        # ABBA order: drift in the machine's load falls on both sides alike
        order = ("alone", "app") if run % 2 == 0 else ("app", "alone")
        for side in order:
            if side == "alone":
                finished, engine_cpu = client_alone(args.preset, sampling)
                alone.append(finished)
                alone_engine_cpu.append(engine_cpu / finished.generated_tokens)
            else:
                finished, cpu, wall, engine_cpu = asyncio.run(in_app(args.preset, sampling))
                app.append(finished)
                ui_share.append(cpu / wall)
                app_engine_cpu.append(engine_cpu / finished.generated_tokens)
    print(f"bundled model, preset {args.preset}, {args.tokens} max tokens, temperature 0, {args.runs} runs each (ABBA), "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    print(f"{'run':<5}{'alone tok/s':>14}{'app tok/s':>12}{'alone gen':>11}{'app gen':>9}{'UI CPU':>9}")
    for index, (a, b, share) in enumerate(zip(alone, app, ui_share), start=1):
        print(f"{index:<5}{a.decode_tps:>14.1f}{b.decode_tps:>12.1f}{a.generated_tokens:>11}{b.generated_tokens:>9}"
              f"{share:>8.0%}")
    alone_median = statistics.median(t.decode_tps for t in alone)
    app_median = statistics.median(t.decode_tps for t in app)
    alone_best, app_best = max(t.decode_tps for t in alone), max(t.decode_tps for t in app)
    print(f"{'median':<5}{alone_median:>14.1f}{app_median:>12.1f}{'':>20}{statistics.median(ui_share):>8.0%}")
    print(f"{'best':<5}{alone_best:>14.1f}{app_best:>12.1f}")
    ratio = app_median / alone_median
    print(f"ratio app/alone: median {ratio:.3f}, best {app_best / alone_best:.3f}   "
          f"target >= 0.95: {'met' if ratio >= 0.95 else 'NOT met'} (median)")
    print("UI CPU = the app process's CPU time over the turn / the turn's wall time (share of one core)")
    alone_cpu_ms, app_cpu_ms = statistics.median(alone_engine_cpu) * 1000, statistics.median(app_engine_cpu) * 1000
    print(f"engine CPU per generated token (prompt included): alone {alone_cpu_ms:.1f} ms, with the app "
          f"{app_cpu_ms:.1f} ms, ratio {alone_cpu_ms / app_cpu_ms:.3f} (the work the engine does is the same; "
          "a tok/s gap beyond this is the CPU the two processes share)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
