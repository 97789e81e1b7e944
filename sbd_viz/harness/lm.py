"""``SBDVizLM``: the lm-eval model ``sbd_viz``, any registered decoder on any model kind.

``generate_until`` decodes each request through the one door (``sv.decode``) with the decoder and settings given in
``--model_args`` (``model=smollm2-135m-sbd,decoder=sbd,gamma=0.5,block_size=4,verify=False``; a plugin's own settings
too), until the task's ``until`` strings or ``max_gen_toks``; ``loglikelihood`` and ``loglikelihood_rolling`` score
with the model's causal logits (exact NTP: what lm-eval's ``hf`` model computes on the same weights). A setting the
decoder does not take is refused by name when the model is built, as ``sv.decode`` refuses it. Each task's calls,
tokens and tokens per call are in the results under ``config.sbd_viz``; ``trace_dir`` keeps every generation's trace.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import torch
from lm_eval import utils as lm_utils
from lm_eval.api.model import TemplateLM
from tqdm import tqdm

from ..decoders import door
from ..decoders.batch import BatchDecoding, decode_batch
from ..models.base import CausalModel
from .samples import TraceFolder
from .speed import Tally, speed_lines

# model_args that the task sets, not the model (refused by name if given there)
TASK_SETTINGS = {"max_new_tokens": "max_gen_toks", "stop": "until"}
MAX_GEN_TOKS = 256  # a request that names no max_gen_toks (lm-eval's hf model's default)
MAX_LENGTH = 2048  # a model that records no context (lm-eval's hf model's default)
AUTO_BATCH = 8  # --batch_size auto: decode_batch's own default (lm-eval's hf model searches memory; a CPU need not)


class SBDVizLM(TemplateLM):
    """An sbd_viz model and decoder as an lm-eval model. ``model``: what ``sv.load_model`` opens (a shipped name, a
    folder, a Hub id at ``revision``; None: the shipped default), or a model loaded already; ``decoder``: a
    registered decoder (None: the model's first); ``trace_dir``: a folder for every generation's trace;
    ``settings``: the decoder's settings. ``batch_size`` above 1 (or ``auto``: 8) decodes a task's requests that
    share their stop strings and length ``batch_size`` rows a forward (``sv.decode_batch``: each text the one alone
    gives, up to float rounding); a decoder that cannot be batched decodes one at a time, and says why once.
    ``max_batch_size`` and ``device`` are taken."""

    backend = "causal"

    def __init__(
        self,
        model=None,
        decoder=None,
        trace_dir=None,
        revision=None,
        dtype=None,
        device=None,
        packed=True,
        batch_size=1,
        max_batch_size=None,
        **settings,
    ):
        super().__init__()
        import sbd_viz as sv

        for name, where in TASK_SETTINGS.items():
            if name in settings:
                raise ValueError(
                    f"{name}: set by each task's {where} (or lm-eval's --gen_kwargs), not in model_args, "
                    f"got {settings[name]!r}"
                )
        if str(device).startswith("cuda") and not torch.cuda.is_available():
            # lm-eval's command line passes --device cuda:0 unless told: a machine without CUDA runs on its CPU
            warnings.warn(f"sbd_viz: device {device!r} is not available here; running on the CPU", stacklevel=2)
            device = "cpu"
        if model is None or isinstance(model, (str, Path)):
            self.sv_model = sv.load_model(model, dtype=dtype, device=device, packed=packed, revision=revision)
        else:  # a model loaded already (simple_evaluate's model_args as a dict): the door checks its kind
            self.sv_model = model
        spec, config, own = door.prepare(self.sv_model, decoder, **settings)  # refuses a setting by name, as sv.decode
        self.spec, self.settings = spec, dict(settings)
        self.batch_size = _batch_size(batch_size)
        self.unbatched = _why_unbatched(self.sv_model, spec, config, own) if self.batch_size > 1 else None
        self.tokenizer = self.sv_model.tokenizer
        self.tally = Tally()
        self.traces = TraceFolder(trace_dir) if trace_dir is not None else None
        self.batch_size_per_gpu = self.batch_size
        self._warned_sampling = False
        self._warned_batch = False

    # -- what lm-eval reads of a model ------------------------------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        """The token an empty context is scored after: BOS, else EOS (as lm-eval's ``hf`` model)."""
        bos = self.tokenizer.bos_token_id
        return bos if bos is not None else self.tokenizer.eos_token_id

    @property
    def max_length(self) -> int:
        return self.sv_model.context_length or MAX_LENGTH

    @property
    def max_gen_toks(self) -> int:
        return MAX_GEN_TOKS

    @property
    def device(self):
        return self.sv_model.device

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tokenizer, "name_or_path", "") or self.sv_model.name).replace("/", "__")

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(
            chat_history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        """The tokenizer's ids, its own special tokens unless told (as lm-eval's ``hf`` model with
        ``add_bos_token`` unset): none added to a string that starts with BOS already."""
        options = {} if add_special_tokens is None else {"add_special_tokens": add_special_tokens}
        bos = self.tokenizer.bos_token
        if add_special_tokens is None and bos and string.startswith(bos):
            options["add_special_tokens"] = False
        return list(self.tokenizer.encode(string, **options))

    def get_model_info(self) -> dict:
        """What the results carry under ``config``: the model, the decoder and its settings, and each task's speed
        (``sbd_viz.harness.speed``); the speed table is printed too."""
        table = self.tally.table()
        if table:
            print(
                "\n".join(
                    ["", f"sbd_viz: {self.spec.label_of(self.settings)} on {self.sv_model.name}"] + speed_lines(table)
                ),
                file=sys.stderr,
            )
        return {
            "sbd_viz": {
                "model": self.sv_model.name,
                "decoder": self.spec.name,
                "label": self.spec.label_of(self.settings),
                "settings": dict(self.settings),
                "tasks": table,
                # where this run's traces are (trace_dir/trace_run), so runs into one folder keep their own
                "trace_run": self.traces.run if self.traces else None,
                "traces": str(self.traces.folder) if self.traces else None,
            }
        }

    # -- scoring: the causal logits --------------------------------------------------------------------------
    def _logits(self, ids: list[int]) -> torch.Tensor:
        """The causal LM's log-probabilities after each of ``ids`` (len(ids), V), float32: the model's own forward,
        no block rows (an adapted model's adapter stays off), as greedy NTP reads them."""
        if not isinstance(self.sv_model, CausalModel):
            raise NotImplementedError(
                f"model: {self.sv_model.name!r} is a {getattr(self.sv_model, 'kind', '?')} model, which has no "
                "causal logits to score with; run generation tasks on it"
            )
        with torch.inference_mode():
            out = self.sv_model.model(input_ids=torch.tensor([ids], device=self.device))
        return out.logits[0].float().log_softmax(-1)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        results = []
        for key, context_enc, continuation_enc in tqdm(requests, disable=disable_tqdm, desc="sbd_viz scoring"):
            ids = (context_enc + continuation_enc)[-(self.max_length + 1) :][:-1]
            n = len(continuation_enc)
            logprobs = self._logits(ids)[len(ids) - n :]
            target = torch.tensor(continuation_enc, device=logprobs.device)
            answer = (float(logprobs.gather(1, target[:, None]).sum()), bool((logprobs.argmax(-1) == target).all()))
            if key is not None:
                self.cache_hook.add_partial("loglikelihood", key, answer)
            results.append(answer)
        return results

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """lm-eval's own encoding of each (context, continuation) (``TemplateLM``), scored task by task so each
        task's scoring time is kept."""
        out: list = [None] * len(requests)
        for task, indices in _by_task(requests).items():
            started = time.perf_counter()
            scores = super().loglikelihood([requests[i] for i in indices], disable_tqdm=disable_tqdm)
            self.tally.scoring(task, time.perf_counter() - started)
            for i, score in zip(indices, scores):
                out[i] = score
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """A whole text's log-likelihood in windows of the model's context, as lm-eval's ``hf`` model cuts them."""
        out = []
        for request in tqdm(requests, disable=disable_tqdm, desc="sbd_viz rolling"):
            started = time.perf_counter()
            (text,) = request.args
            windows = [
                (None, *lm_utils.make_disjoint_window(window))
                for window in lm_utils.get_rolling_token_windows(
                    token_list=self.tok_encode(text),
                    prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length,
                    context_len=1,
                )
            ]
            total = sum(ll for ll, _ in self._loglikelihood_tokens(windows, disable_tqdm=True))
            self.cache_hook.add_partial("loglikelihood_rolling", (text,), total)
            self.tally.scoring(_task(request), time.perf_counter() - started)
            out.append(total)
        return out

    # -- generation: the one door ----------------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Each request decoded until its stop strings or its most new tokens; ``batch_size`` rows a forward where
        the decoder can be batched (requests of one task with the same stop strings and length go together)."""
        if self.batch_size > 1 and self.unbatched and not self._warned_batch:
            self._warned_batch = True
            warnings.warn(f"sbd_viz: decoding one request at a time: {self.unbatched}", stacklevel=2)
        batched = self.batch_size > 1 and not self.unbatched
        groups: dict[tuple, list[int]] = defaultdict(list)
        asks = []
        for i, request in enumerate(requests):
            context, gen_kwargs = request.args
            until, max_gen = self._until(gen_kwargs)
            asks.append((context, until, self._room(context, max_gen)))
            key = (_task(request), tuple(until), asks[-1][2]) if batched else (i,)
            groups[key].append(i)
        out: list = [None] * len(requests)
        bar = tqdm(total=len(requests), disable=disable_tqdm, desc=f"sbd_viz {self.spec.name}")
        for indices in groups.values():
            _, until, room = asks[indices[0]]
            started = time.perf_counter()
            if batched:
                traces = decode_batch(
                    self.sv_model,
                    [asks[i][0] for i in indices],
                    decoder=self.spec.name,
                    batch_size=self.batch_size,
                    max_new_tokens=room,
                    stop=until,
                    **self.settings,
                )
            else:
                traces = [
                    door.decode(
                        self.sv_model,
                        asks[indices[0]][0],
                        decoder=self.spec.name,
                        max_new_tokens=room,
                        stop=until,
                        **self.settings,
                    )
                ]
            seconds = (time.perf_counter() - started) / len(indices)  # a batch's wall clock, shared by its rows
            for i, trace in zip(indices, traces):
                out[i] = self._answer(requests[i], trace, until, seconds)
            bar.update(len(indices))
        bar.close()
        return out

    def _answer(self, request, trace, until: list[str], seconds: float) -> str:
        """A request's text from its trace (before the first stop string, as lm-eval's hf model returns it), its
        counts and trace kept."""
        context, _ = request.args
        self.tally.add(_task(request), trace, seconds)
        if self.traces is not None:
            self.traces.write(_task(request), request.doc_id, context, trace)
        text = trace.text
        for stop in until:
            text = text.split(stop)[0]
        self.cache_hook.add_partial("generate_until", request.args, text)
        return text

    def _until(self, gen_kwargs) -> tuple[list[str], int]:
        """The request's stop strings and most new tokens; asks for sampling are noted once (the decoder's own
        settings from model_args decide how it decodes)."""
        kwargs = dict(gen_kwargs or {})
        until = kwargs.pop("until", None) or []
        until = [until] if isinstance(until, str) else [s for s in until if isinstance(s, str) and s]
        max_gen = int(kwargs.pop("max_gen_toks", self.max_gen_toks))
        if (kwargs.get("do_sample") or kwargs.get("temperature")) and not self._warned_sampling:
            self._warned_sampling = True
            warnings.warn(
                "sbd_viz: the task asks for sampling; the decoder decodes with its settings from model_args "
                f"({self.settings or 'its defaults'})",
                stacklevel=2,
            )
        return until, max_gen

    def _room(self, context: str, max_gen: int) -> int:
        """``max_gen`` new tokens, or fewer where the model's context ends (a block model writes whole blocks)."""
        limit = self.sv_model.context_length
        if limit is None:
            return max_gen
        left = limit - len(self.sv_model.encode(context))
        room = max_gen
        while room > 1 and self.sv_model.tokens_written(room) > left:
            room -= 1
        return room  # a context with no room left is refused by the door, naming the prompt


def _batch_size(value) -> int:
    """lm-eval's ``batch_size`` (an int, its text, or ``auto``/``auto:N``) as rows a forward."""
    if isinstance(value, str) and value.strip().startswith("auto"):
        return AUTO_BATCH
    try:
        size = int(value)
    except (TypeError, ValueError):
        size = 0
    if size < 1 or (isinstance(value, float) and value != size):
        raise ValueError(f"batch_size: must be a whole number of at least 1, or 'auto', got {value!r}")
    return size


def _why_unbatched(model, spec, config, own) -> str | None:
    """Why ``spec`` with these settings cannot decode requests side by side on ``model``, as ``BatchDecoding``
    refuses it (a decoder with no batched form; settings that ask for calls a batch cannot make, as tree drafting
    does); None if it can."""
    if not isinstance(model, CausalModel):  # said plainly: BatchDecoding would call it "not a model of sbd_viz"
        return f"model {model.name!r} is not a causal model"
    try:
        BatchDecoding(model, ["a"], config, batch_size=1, decoder=spec, own=own)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def _task(request) -> str:
    return getattr(request, "task_name", None) or "unnamed"


def _by_task(requests) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, request in enumerate(requests):
        groups[_task(request)].append(i)
    return groups
