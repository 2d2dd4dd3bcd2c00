"""Tetris: a scripted placement planner clears rows and passes; scores stay monotone."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from vical.envs import make_env
from vical.spec import get_task, select_tasks


def _fits(board, matrix, x, y):
    h, w = matrix.shape
    if y + h > board.shape[0] or x < 0 or x + w > board.shape[1]:
        return False
    return not np.any(board[y : y + h, x : x + w][matrix > 0] > 0)


def _drop(env, board, matrix, x):
    """The board after dropping ``matrix`` in column ``x`` with full rows removed, and rows cleared."""
    if not _fits(board, matrix, x, 0):
        return None, 0
    y = 0
    while _fits(board, matrix, x, y + 1):
        y += 1
    board = board.copy()
    h, w = matrix.shape
    board[y : y + h, x : x + w] += matrix
    inner = board[: env.height, env.padding : env.padding + env.width]
    full = np.all(inner > 0, axis=1)
    if full.any():
        kept = inner[~full]
        inner = np.vstack([np.zeros((int(full.sum()), env.width), board.dtype), kept])
        board[: env.height, env.padding : env.padding + env.width] = inner
    return board, int(full.sum())


def _shape(env, board):
    """Holes (empty cells under a block) and pile height of a board."""
    filled = board[: env.height, env.padding : env.padding + env.width] > 0
    tops = np.where(filled.any(axis=0), filled.argmax(axis=0), env.height)
    holes = sum(int((~filled[tops[c] :, c]).sum()) for c in range(env.width))
    return holes, env.height - int(tops.min())


def _placements(env, board, matrix):
    """Every (turns, column, board after, rows cleared) for one piece on a board."""
    for turns in range(4):
        for x in range(0, env.width_padded - matrix.shape[1] + 1):
            after, rows = _drop(env, board, matrix, x)
            if after is not None:
                yield turns, x, after, rows
        matrix = np.rot90(matrix, k=1)  # the simulator's clockwise turn


def planner_action(vical_env) -> str:
    """Greedy planner: rotate, shift, then hard-drop to the best placement of the falling piece.

    Placements are ranked by rows cleared, then fewer holes, then a lower pile,
    then fewer actions. Replanned every decision, so gravity moving the piece
    is taken into account.
    """
    env = vical_env.adapter.env
    best = None
    for turns, x, after, rows in _placements(env, env.board, env.active_tetromino.matrix):
        holes, height = _shape(env, after)
        rank = (rows, -holes, -height, -(turns + abs(x - env.x)))
        if best is None or rank > best[0]:
            best = (rank, turns, x)
    assert best is not None
    _, turns, x = best
    if turns:
        return "Rotate"
    if x > env.x:
        return "Move Right"
    if x < env.x:
        return "Move Left"
    return "Hard Drop"


def play(task, policy):
    env = make_env(task)
    env.reset()
    scores = [env.score()]
    while not env.done:
        s = env.step(policy(env))
        scores.append(s.score)
    out = (env.score(), env.passed(), env.outcome, env.progress(), scores)
    env.close()
    return out


@pytest.mark.parametrize("task", select_tasks("tetris"), ids=lambda t: t.id)
def test_planner_clears_rows_and_passes(task):
    score, passed, outcome, progress, scores = play(task, planner_action)
    assert progress["rows_cleared"] >= 1 and passed
    assert all(b >= a for a, b in pairwise(scores)), "score must never decrease"
    assert 50.0 in scores, "one cleared row is worth half the score"
    if progress["rows_cleared"] >= 2:
        assert outcome == "Victory" and score == 100.0
    else:
        assert outcome == "Time Out" and score == 50.0


def test_planner_wins_most_tasks():
    # The greedy planner wastes moves on some piece orders (seed271's 39-move
    # budget is too tight for it), but two rows are within reach on most tasks.
    wins = [play(t, planner_action)[2] == "Victory" for t in select_tasks("tetris")]
    assert sum(wins) >= 4


def test_one_row_passes_before_the_end():
    task = get_task("tetris/seed43")
    env = make_env(task)
    env.reset()
    while env.progress()["rows_cleared"] == 0:
        s = env.step(planner_action(env))
        assert not s.done or s.passed
    assert env.passed() and env.score() == 50.0
    env.close()


def test_hard_dropping_in_place_tops_out_without_passing():
    score, passed, outcome, progress, _ = play(get_task("tetris/seed535"), lambda e: "Hard Drop")
    assert outcome == "Terminated" and progress["topped_out"]
    assert not passed and score == 0.0


def test_piece_drop_reward_is_ignored():
    env = make_env(get_task("tetris/seed47"))
    env.reset()
    for _ in range(3):
        env.step("Hard Drop")
    assert env.score() == 0.0 and not env.passed()
    env.close()
