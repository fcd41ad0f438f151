"""plateau's live verdict and per-step memory for the trainer's own loggers (docs/python.md, "Loggers").

What is logged, as scalars named plateau/...:
- per-step memory, read in the process at the step: plateau/rss_bytes (/proc/self/statm), and once the program has
  initialised CUDA, plateau/cuda_allocated_bytes and plateau/cuda_reserved_bytes (torch.cuda, summed over devices);
- the live verdict, as plateau run's watcher last wrote it into the run directory (live.prom, the Prometheus text
  of docs/live.md) for this process: plateau/verdict (a code: 0 no data, 1 flat, 2 warming up, 3 undecided,
  4 slow growth, 5 leak suspected, 6 leak: the higher, the worse), and per metric M (heap, rss, dev) that has them
  plateau/M_growth_bytes_per_step, plateau/M_oom_seconds and plateau/M_more_steps.
The watcher runs with plateau run's live line (on a terminal, or `plateau run --live`) and --stop-on-leak; without
it only the memory is logged, and one note on plateau's channel says why.
Nothing here raises into the program, imports torch, or initialises CUDA.
"""
import os
import re
import sys

from . import _native

# the verdict codes: ordered by severity, as the live line ranks the states (reports/live/live.c)
VERDICT_CODES = {"no_data": 0, "flat": 1, "warming_up": 2, "undecided": 3, "slow_growth": 4, "leak_suspected": 5,
                 "leak": 6}
LIVE_FILE = "live.prom"   # in the run directory, written by plateau run's watcher at each poll

_SAMPLE = re.compile(r'^(plateau_[a-z_]+)\{(.*)\}\s+(\S+)\s*$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_PER_METRIC = {"plateau_growth_bytes_per_step": "growth_bytes_per_step", "plateau_oom_seconds": "oom_seconds",
               "plateau_more_steps": "more_steps"}


def parse_live(text, pid):
    """The live verdict of process pid from live.prom's text: {"plateau/verdict": code, "plateau/heap_...": v}."""
    out = {}
    want = str(pid)
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), dict(_LABEL.findall(m.group(2))), m.group(3)
        if labels.get("pid") != want:
            continue
        try:
            v = float(value)
        except ValueError:
            continue
        if name == "plateau_verdict" and v == 1 and labels.get("state") in VERDICT_CODES:
            out["plateau/verdict"] = float(VERDICT_CODES[labels["state"]])
        elif name in _PER_METRIC and labels.get("metric"):
            out["plateau/%s_%s" % (labels["metric"], _PER_METRIC[name])] = v
    return out


class Live(object):
    """The live verdict of this process, re-read from the run directory's live.prom when the file changed."""

    def __init__(self, run_dir=None):
        # plateau's variables are not in the program's environment (docs/env.md): the tracer's copy
        d = run_dir if run_dir is not None else (_native.env("PLATEAU_DIR") or "")
        self.path = os.path.join(d, LIVE_FILE) if d else None
        self._stamp = None
        self._values = {}
        self.seen = False   # a live.prom was read at least once

    def values(self):
        if self.path is None:
            return {}
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_ino, st.st_size)
            if stamp != self._stamp:
                with open(self.path) as f:
                    text = f.read()
                self._stamp = stamp
                self._values = parse_live(text, os.getpid())
                self.seen = True
        except (OSError, ValueError):
            pass
        return dict(self._values)


def memory():
    """This process's memory now: RSS, and torch's CUDA counters once the program initialised CUDA."""
    out = {}
    try:
        with open("/proc/self/statm") as f:
            out["plateau/rss_bytes"] = float(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        pass
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    try:
        if cuda is not None and cuda.is_initialized():
            n = cuda.device_count()
            out["plateau/cuda_allocated_bytes"] = float(sum(cuda.memory_allocated(d) for d in range(n)))
            out["plateau/cuda_reserved_bytes"] = float(sum(cuda.memory_reserved(d) for d in range(n)))
    except Exception:
        pass
    return out


class Collector(object):
    """What a callback logs at a step: memory now and the live verdict. Says once (plateau's note channel) when
    the run has no live verdict to log."""

    def __init__(self):
        self.live = Live()
        self._steps = 0
        self._noted = False

    def collect(self):
        values = memory()
        values.update(self.live.values())
        self._steps += 1
        if not self.live.seen and not self._noted and self.live.path and self._steps >= 100:
            self._noted = True
            _native.note("the callbacks log memory only: no live verdict in %s after %d steps (it is written by "
                         "plateau run's live line: a terminal, or plateau run --live)" % (self.live.path,
                                                                                         self._steps))
        return values


# ------------------------------------------------------------------------------------------------ the loggers

def _tensorboard_writer(log_dir):
    """A SummaryWriter on log_dir from torch.utils.tensorboard or tensorboardX, or None."""
    for mod in ("torch.utils.tensorboard", "tensorboardX"):
        try:
            __import__(mod)
            return sys.modules[mod].SummaryWriter(log_dir=log_dir)
        except Exception:
            continue
    return None


class HFLoggers(object):
    """The loggers of a transformers Trainer run, as its TrainingArguments configure them: `report_to` names
    "tensorboard" (a writer of ours in args.logging_dir, beside the Trainer's own event file: TensorBoard shows
    both as one run) and "wandb" (the run the Trainer's WandbCallback started, with train/global_step as the x axis
    it defines)."""

    def __init__(self):
        self._tb = None
        self._tb_tried = False

    def log(self, args, values, step):
        report_to = getattr(args, "report_to", None) or []
        if isinstance(report_to, str):
            report_to = [report_to]
        if ("tensorboard" in report_to or "all" in report_to) and not self._tb_tried:
            self._tb_tried = True
            log_dir = getattr(args, "logging_dir", None)
            self._tb = _tensorboard_writer(log_dir) if log_dir else None
        if self._tb is not None:
            try:
                for k, v in values.items():
                    self._tb.add_scalar(k, v, step)
                self._tb.flush()
            except Exception:
                pass
        wandb = sys.modules.get("wandb")
        if ("wandb" in report_to or "all" in report_to) and wandb is not None and getattr(wandb, "run", None):
            try:
                wandb.log(dict(values, **{"train/global_step": step}))
            except Exception:
                pass

    def close(self):
        if self._tb is not None:
            try:
                self._tb.close()
            except Exception:
                pass
            self._tb = None


def lightning_log(trainer, values, step):
    """Every logger the Lightning Trainer has (trainer.loggers: TensorBoard, W&B, CSV, MLflow ...), through the
    one method they all have, log_metrics."""
    loggers = getattr(trainer, "loggers", None)
    if loggers is None:
        one = getattr(trainer, "logger", None)
        loggers = [one] if one is not None else []
    for lg in loggers:
        try:
            lg.log_metrics(values, step=step)
        except Exception:
            pass
