"""Shows a chat answer's vote: every distinct answer with its votes and summed log-probability."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from workbench.core.tasks.vote import VoteResult


def vote_text(vote: VoteResult, n: int) -> Text:
    text = Text()
    if vote.answer is None:
        text.append(f"vote over {n} samples: no sample gave an answer to vote on", style="bold")
        return text
    tie = " (tie broken by log-probability)" if vote.tie_broken else ""
    text.append(f"vote over {n} samples: {vote.counts[0].votes}/{n} agree{tie}\n", style="bold")
    for count in vote.counts[:6]:
        shown = count.answer if len(count.answer) <= 60 else count.answer[:57] + "..."
        text.append(f"  {count.votes} x {shown!r}  (Σ log p {count.logprob_sum:.1f})\n")
    if len(vote.counts) > 6:
        text.append(f"  ... {len(vote.counts) - 6} more answers\n")
    if vote.unparseable:
        text.append(f"  {vote.unparseable} empty answers did not vote\n")
    return text


class VoteView(Static):
    """The tally under a voted answer (styled in app.tcss)."""

    def __init__(self, vote: VoteResult, n: int) -> None:
        super().__init__(vote_text(vote, n))
        self.vote = vote
