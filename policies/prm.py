"""A process reward model (PRM) for web agents, after Web-Shepherd.

Web-Shepherd (Chae et al., "Web-Shepherd: Advancing PRMs for Reinforcing Web Agents", NeurIPS
2025; github.com/kyle8581/Web-Shepherd) judges one step of a web agent: given the user's
instruction, the trajectory so far, the current page, a checklist of the task's sub-goals and
the agent's thought and action, it answers each checklist item ``Yes``, ``In Progress`` or
``No``. The step's reward is the mean over items of P(Yes) + 0.5 P(In Progress), each item's
three probabilities read at its judgement token and renormalised over the three
(``src/webprm/models.py``, ``get_judge_probs``; ``src/utils/eval_utils.py``, ``get_score``).

Here the judge is a :class:`policies.lm.student.Student` (SmolLM2-135M-Instruct, usually with a
LoRA adapter; a tiny Llama for tests) fine-tuned on the rows of ``arena web prm-data``
(:mod:`envs.web.prm`): the prompt is Web-Shepherd's own (``JUDGE_OURS_USER_PROMPT_FORMAT`` with
``input_information.py``'s sections, empty system message) and the answer its checklist
evaluation, ``CHECKLIST EVALUATION:`` then one ``Checklist k: <judgement>`` line per item.
Web-Shepherd's model first writes a paragraph of feedback (GPT-4o's, in its training data);
the twin has no one to write it, so the answer here is the evaluation alone. The PRM also
learns Web-Shepherd's other task, writing the checklist from the instruction and the first
page (``CHECKLIST_OURS_USER_PROMPT``; again without its analysis paragraph).

Scoring (:meth:`ProcessRewardModel.judge`) reads each item's three probabilities where the
answer's judgement starts, then feeds the likeliest judgement and the next item's header, as
Web-Shepherd reads them from its own generated answer. The candidates of one state share the
prompt up to the agent's response (Web-Shepherd puts the response last), so that prefix is
read once and its key/value cache copied for each candidate.

:func:`episode_step_rewards` scores every step of played episodes (GRPO's dense rewards,
``policies.grpo``'s ``prm``): a state reached by several attempts of a group is judged once,
for all the actions they took there.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from policies.lm.student import Student, StudentSettings, pad_sequences

YES, IN_PROGRESS, NO = "Yes", "In Progress", "No"
JUDGEMENTS = (YES, IN_PROGRESS, NO)
"""Web-Shepherd's three labels, in the order of :meth:`ProcessRewardModel.judge`'s probs."""
VALUE = {YES: 1.0, IN_PROGRESS: 0.5, NO: 0.0}
"""Each label's worth in the step reward (``get_score``)."""
HISTORY_STEPS = 10
"""The trajectory lists the last ten steps (``evaluate_web_reward_bench.py``, ``get_trajectory``)."""
EVALUATION = "CHECKLIST EVALUATION:"
"""The line before the judgements (``eval_type.py``'s output format; ``get_judge_probs`` reads
judgements only after it)."""

# --- Web-Shepherd's prompts (src/webprm/prompts/judge_prompt.py, input_information.py,
# checklist_prompt.py), verbatim but for the image sections the twin has no screenshot for.
JUDGE = """You are an expert evaluator of web agent. Your task is to assess how helpful a given agent's THOUGHT and ACTION is in making progress toward the user's goal, based on the current state of the webpage.

# Task Description
Evaluate how well the agent’s THOUGHT and ACTION satisfy each item in the checklist using the task instruction, trajectory (including previously completed steps), current webpage state, and the agent’s latest response. Start by writing a concise paragraph summarizing the agent’s overall performance. Refer to the reasoning provided in the trajectory, and discuss whether the THOUGHT is appropriate and the ACTION moves the task forward.
Then, assess each checklist item individually using the following labels:
- Yes: The item is fully and clearly satisfied, either in the current response or previously completed.
- In Progress: There is meaningful partial progress toward completing the item.
- No: The item is not satisfied due to ambiguity, insufficient evidence, or lack of progress.

# Given Information
"""
INSTRUCTION = "## User Instruction\n{intent}\n"
TRAJECTORY = "## Trajectory\n{trajectory}"
STATE = "## Current State\n### Current URL\n{current_url}\n"
AXTREE = (
    "### AXTREE\nNote: [bid] is the unique alpha-numeric identifier at the beginning of lines "
    "for each element in the AXTree. Always use bid to refer to elements in your actions.\n"
    "{text_observation}\n"
)
CHECKLIST = "## Checklist\n{checklist}\n"
RESPONSE = "## Agent's Response\nTHOUGHT: {thought}\nACTION: {action}\n"
CHECKLIST_TASK = """You are an AI assistant tasked with generating structured checklists that highlight key subgoals necessary to complete a task.

# Task Description
Generate a checklist which are key milestones for achieving the given instruction. Frist, provide a concise\x20
subgoal analysis in a single paragraph summarizing the required interactions. Then, based on this, generate the checklist with breif description.

Note: If the target website requires login, assume the user is already logged in and starts from an authenticated session.

# Given Information
## User Instruction
{intent}

## Current State
### Current URL
{start_url}

"""
CHECKLIST_TOKENS = 256
"""Most tokens of a written checklist (five items of a title and a goal line)."""
_ITEM = re.compile(r"^Checklist (\d+):", re.M)


def items_of(checklist: str) -> int:
    """How many items a checklist text (``gt_checklist``) has."""
    return len(_ITEM.findall(checklist))


def trajectory(row: dict) -> str:
    """The trajectory section's body: ``Thought i``/``Action i`` of the last ten steps."""
    step = len(row["action_history"])
    return "".join(
        f"Thought {i + 1}: {row['thought_history'][i]}\nAction {i + 1}: {row['action_history'][i]}\n\n"
        for i in range(max(0, step - HISTORY_STEPS), step)
    )


def judge_context(row: dict, tree: str) -> str:
    """The judge's user message up to the agent's response (shared by a state's candidates)."""
    return (
        JUDGE
        + INSTRUCTION.format(intent=row["intent"])
        + TRAJECTORY.format(trajectory=trajectory(row))
        + STATE.format(current_url=row["current_url"])
        + AXTREE.format(text_observation=tree)
        + CHECKLIST.format(checklist=row["gt_checklist"])
    )


def checklist_context(row: dict, tree: str) -> str:
    """The checklist prompt's user message for the state of ``row`` (its first page)."""
    return CHECKLIST_TASK.format(intent=row["intent"], start_url=row["start_url"]) + AXTREE.format(
        text_observation=tree
    )


@dataclass
class Example:
    """One supervised example: prompt ids and answer ids (the loss is on the answer)."""

    prompt: list[int]
    answer: list[int]


class ProcessRewardModel:
    """A :class:`Student` as Web-Shepherd's judge: prompts, answers, the training loss and the
    step scores."""

    def __init__(self, student: Student):
        self.student, self.tok = student, student.tok
        self.tokens_read = 0
        """Tokens the model has read in :meth:`judge` and :meth:`write_checklist` (FLOPs)."""
        # Each judgement's first token must differ from the others' (that is where its
        # probability is read). A BPE vocabulary has " Yes", " In", " No"; a byte one would
        # share the space, so there the space ends the item's header instead.
        pieces = [self.tok.encode(" " + j) for j in JUDGEMENTS]
        self.space_in_header = len({p[0] for p in pieces}) < len(JUDGEMENTS)
        gap = "" if self.space_in_header else " "
        self.judgement_ids = [self.tok.encode(gap + j) for j in JUDGEMENTS]
        self.first_ids = [ids[0] for ids in self.judgement_ids]
        if len(set(self.first_ids)) < len(JUDGEMENTS):
            raise ValueError("the tokenizer gives the three judgements one first token")

    # --- prompts and answers -----------------------------------------------------------------
    def fit(self, context: str, tails: list[str], tree: str) -> list[list[int]]:
        """Chat prompts of ``context`` (a format over the tree) with each tail, the tree's
        last lines dropped until the longest fits ``max_prompt_tokens``."""
        lines, limit = tree.split("\n"), self.student.settings.max_prompt_tokens
        keep = len(lines)
        while True:
            shown = "\n".join(lines[:keep]) + ("\n..." if keep < len(lines) else "")
            body = context.replace("{tree}", shown)
            ids = [
                self.tok.chat(
                    [{"role": "system", "content": ""}, {"role": "user", "content": body + t}]
                )
                for t in tails
            ]
            longest = max(len(i) for i in ids)
            if longest <= limit or keep <= 1:
                return [i[-limit:] for i in ids]
            keep = max(1, keep - max(1, (longest - limit) // 8))

    def judge_prompts(self, row: dict, responses: list[dict]) -> list[list[int]]:
        """The judge's prompt for each candidate ``{"thought", "action"}`` at ``row``'s state."""
        context = judge_context(row, "{tree}")
        tails = [RESPONSE.format(thought=r["thought"], action=r["action"]) for r in responses]
        return self.fit(context, tails, row["text_observation"])

    def header(self, k: int) -> list[int]:
        """Ids before item ``k``'s judgement (``k`` from 1): the evaluation line first."""
        text = (f"{EVALUATION}\n" if k == 1 else "\n") + f"Checklist {k}:"
        return self.tok.encode(text + (" " if self.space_in_header else ""))

    def judge_answer(self, judgements: list[str]) -> list[int]:
        """The answer's ids: each item's header and judgement, then the end marker; built
        piece by piece, so training sees the very tokens :meth:`judge` reads."""
        ids: list[int] = []
        for k, j in enumerate(judgements, 1):
            ids += self.header(k) + self.judgement_ids[JUDGEMENTS.index(j)]
        return ids + [self.tok.im_end]

    def judge_examples(self, row: dict) -> list[Example]:
        """A training example per candidate of a ``pairs.jsonl`` row (chosen and rejected),
        answered with the statuses its action leads to."""
        responses = row["chosen"] + row["rejected"]
        prompts = self.judge_prompts(row, responses)
        return [
            Example(p, self.judge_answer(r["checklist_evaluation"]))
            for p, r in zip(prompts, responses, strict=True)
        ]

    def checklist_example(self, row: dict) -> Example:
        """Writing the checklist from the instruction and the first page (a step-0 row)."""
        prompt = self.fit(checklist_context(row, "{tree}"), [""], row["text_observation"])[0]
        return Example(prompt, self.tok.encode(row["gt_checklist"]) + [self.tok.im_end])

    # --- training ------------------------------------------------------------------------------
    def loss(self, examples: list[Example]) -> tuple[torch.Tensor, int]:
        """Mean cross-entropy over the answers' tokens, and how many tokens were read."""
        rows = [e.prompt + e.answer for e in examples]
        tokens = pad_sequences(rows, self.tok.pad_id)
        attention = torch.zeros_like(tokens)
        targets = torch.zeros_like(tokens, dtype=torch.bool)
        for i, e in enumerate(examples):
            n = len(e.prompt) + len(e.answer)
            attention[i, :n] = 1
            targets[i, len(e.prompt) : n] = True
        self.student.model.train()
        logp, _ = self.student.token_logps(tokens, attention, targets, None)
        return -logp.mean(), int(attention.sum())

    # --- scoring -------------------------------------------------------------------------------
    @torch.no_grad()
    def judge(self, row: dict, responses: list[dict]) -> list[list[list[float]]]:
        """For each candidate, each item's (P(Yes), P(In Progress), P(No)).

        The prompts' common prefix is read once; each candidate continues from a copy of its
        cache: the rest of its prompt, then per item the header, where the three
        probabilities are read, and the likeliest judgement."""
        model = self.student.model
        model.eval()
        prompts = self.judge_prompts(row, responses)
        n_items = items_of(row["gt_checklist"])
        common = 0
        while all(len(p) > common + 1 for p in prompts) and len({p[common] for p in prompts}) == 1:
            common += 1
        dev = next(model.parameters()).device
        shared = None  # no common prefix: prompts cut at the front to fit
        if common:
            ids = torch.tensor([prompts[0][:common]], device=dev)
            shared = model(input_ids=ids, use_cache=True).past_key_values
            self.tokens_read += common
        out = []
        for p in prompts:
            past, pos = copy.deepcopy(shared), common
            feed, probs = p[common:], []
            for k in range(1, n_items + 1):
                feed = feed + self.header(k)
                ids = torch.tensor([feed], device=dev)
                step = model(
                    input_ids=ids,
                    position_ids=torch.arange(pos, pos + len(feed), device=dev)[None],
                    past_key_values=past,
                    use_cache=True,
                )
                past, pos = step.past_key_values, pos + len(feed)
                self.tokens_read += len(feed)
                logits = step.logits[0, -1].float()[self.first_ids]
                dist = torch.softmax(logits, -1)
                probs.append(dist.tolist())
                feed = list(self.judgement_ids[int(dist.argmax())])
            out.append(probs)
        return out

    def write_checklist(self, intent: str, start_url: str, tree: str) -> str:
        """The checklist the model writes (greedy) for a task from its first page."""
        row = {"intent": intent, "start_url": start_url}
        prompt = self.fit(checklist_context(row, "{tree}"), [""], tree)[0]
        done = self.student.generate([prompt], 0.0, None, CHECKLIST_TOKENS)[0]
        self.tokens_read += len(prompt) + len(done.tokens)
        return done.text

    def scores(self, row: dict, responses: list[dict]) -> list[float]:
        """Each candidate's step reward: the mean over items of P(Yes) + 0.5 P(In Progress)."""
        return [step_reward(p) for p in self.judge(row, responses)]


def step_reward(item_probs: list[list[float]]) -> float:
    """Web-Shepherd's ``get_score`` with probabilities: mean of P(Yes) + 0.5 P(In Progress)."""
    if not item_probs:
        return 0.0
    return sum(p[0] + 0.5 * p[1] for p in item_probs) / len(item_probs)


class PRMError(ValueError):
    """Bad input to a PRM (a missing data set, a run that is not a PRM run)."""


def build_prm(model: StudentSettings, seed: int = 0) -> ProcessRewardModel:
    return ProcessRewardModel(Student.build(model, seed))


def load_prm(run: str | Path) -> ProcessRewardModel:
    """The PRM of an ``arena prm train`` run (its adapter on the base it was trained on)."""
    from policies.lm.student import check_base

    run = Path(run)
    if not (run / "prm.json").is_file() or not (run / "checkpoint.pt").is_file():
        raise PRMError(f"{run} is not an arena prm train run (no prm.json/checkpoint.pt)")
    meta = json.loads((run / "prm.json").read_text())
    config = meta["config"]
    model = StudentSettings(**config["model"])
    check_base(meta["base"], model, str(run))
    prm = build_prm(model, config.get("seed", 0))
    blob = torch.load(run / "checkpoint.pt", weights_only=True)
    prm.student.load_checkpoint_state(blob["model"], str(run / "checkpoint.pt"))
    return prm


# --- judging a played episode's steps --------------------------------------------------------
CHECKLISTS = ("written", "twin")
"""Where a task instance's checklist comes from: the PRM writes it from the first page (as
Web-Shepherd does at test time), or the twin's expert plan gives it (an oracle's)."""


def task_checklist(prm: ProcessRewardModel, env_id: str, seed: int, obs: str, source: str) -> str:
    """The checklist of page ``seed`` of ``env_id`` (first observation ``obs``)."""
    from envs.web import prm as labels

    if source == "twin":
        episode = labels.label_episode(env_id, seed, [], rejected=0)
        return labels.checklist_text(episode.items) if episode else ""
    start_url = labels.page_url(labels.pages_of(env_id)[0])
    return prm.write_checklist(labels.goal_text(obs), start_url, labels.tree_text(obs))


def step_state(
    env_id: str, obs: str, page: int, checklist: str, thoughts: list[str], actions: list[str]
) -> dict:
    """The judge's view of a state: a row as ``arena web prm-data`` writes them."""
    from envs.web import prm as labels

    return {
        "intent": labels.goal_text(obs),
        "current_url": labels.page_url(labels.pages_of(env_id)[page]),
        "text_observation": labels.tree_text(obs),
        "gt_checklist": checklist,
        "thought_history": thoughts,
        "action_history": actions,
    }


def step_response(obs: str, action: str, page: int) -> dict:
    """An action as the judge reads it, with the thought the labels give every action."""
    from envs.web import prm as labels

    return {"thought": labels.step_thought(labels.describe(obs, action, page)), "action": action}


def episode_step_rewards(
    prm: ProcessRewardModel, episodes: list, checklist: str
) -> list[list[float]]:
    """The PRM's reward for every step of played episodes (``policies.lm.play.Episode``s on
    the twin). Episodes of one page seed share its checklist; a state (page seed and the
    actions so far) is judged once, for all the actions played from it, so a group's
    attempts pay once for the states they share."""
    from policies.lm.play import env_id_for

    checklists: dict[tuple, str] = {}
    states: dict[tuple, tuple[dict, dict[str, dict]]] = {}
    for ep in episodes:
        env_id = env_id_for(ep.task, "twin")
        if (ep.task, ep.seed) not in checklists:
            checklists[ep.task, ep.seed] = task_checklist(
                prm, env_id, ep.seed, ep.observations[0], checklist
            )
        thoughts: list[str] = []
        for t, (obs, page, action) in enumerate(
            zip(ep.observations, ep.pages, ep.actions, strict=True)
        ):
            key = (ep.task, ep.seed, tuple(ep.actions[:t]))
            if key not in states:
                row = step_state(
                    env_id, obs, page, checklists[ep.task, ep.seed], thoughts, ep.actions[:t]
                )
                states[key] = (row, {})
            response = states[key][1].setdefault(action, step_response(obs, action, page))
            thoughts = [*thoughts, response["thought"]]
    reward = {}
    for key, (row, responses) in states.items():
        for action, r in zip(responses, prm.scores(row, list(responses.values())), strict=True):
            reward[(*key, action)] = r
    return [
        [reward[ep.task, ep.seed, tuple(ep.actions[:t]), a] for t, a in enumerate(ep.actions)]
        for ep in episodes
    ]
