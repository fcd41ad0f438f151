"""Callbacks for Hugging Face transformers' Trainer and for Lightning, built on first use.

Each subclasses its framework's callback base when that framework imports (frameworks check the type), and is a
plain class otherwise (tests, or duck-typed trainers): then any other `on_*` hook is a no-op. Both call
plateau.step() once per optimizer step (accumulation-aware: the frameworks' global step counts optimizer steps)
and plateau.mark() around evaluation, so they also work where the bootstrap did not run.
At the trainer's own logging cadence (HF's logging_steps, Lightning's log_every_n_steps) they also log per-step
memory and plateau's live verdict to the trainer's loggers (plateau/_loggers.py); log=False turns that off.
"""
import sys


def _import_first(names):
    """The first importable attribute among 'module:attr' names, preferring modules the program already loaded."""
    loaded = [n for n in names if n.split(":")[0] in sys.modules]
    for n in loaded + [n for n in names if n not in loaded]:
        mod, attr = n.split(":")
        try:
            __import__(mod)
            return getattr(sys.modules[mod], attr)
        except Exception:
            continue
    return None


class _NoOpHooks(object):
    """Any on_* hook the framework may call and we do not define does nothing (duck-typed use only)."""

    def __getattr__(self, name):
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


def _api():
    return sys.modules[__name__.rpartition(".")[0]]  # this package, whatever name it was loaded under


def _init(self, log=True):
    """log: also log per-step memory and the live verdict to the trainer's loggers (default on)."""
    self.__dict__["_plateau_log"] = bool(log)


def _collector(self):
    c = self.__dict__.get("_plateau_collector")
    if c is None:
        from . import _loggers
        c = self.__dict__["_plateau_collector"] = _loggers.Collector()
    return c


def _due(step, every):
    try:
        every = int(every)
    except (TypeError, ValueError):
        every = 1
    return step is not None and step > 0 and step % max(every, 1) == 0


def make_TrainerCallback():
    base = _import_first(["transformers:TrainerCallback", "transformers.trainer_callback:TrainerCallback"])
    bases = (base,) if base is not None else (_NoOpHooks,)

    def on_step_end(self, args, state, control, **kwargs):
        """After each optimizer step (Trainer's global_step counts accumulated batches once)."""
        _api().step()
        if not self.__dict__.get("_plateau_log", True):
            return
        try:
            step = getattr(state, "global_step", None)
            strategy = str(getattr(getattr(args, "logging_strategy", "steps"), "value",
                                   getattr(args, "logging_strategy", "steps")))
            if strategy == "steps" and _due(step, getattr(args, "logging_steps", 1)):
                loggers = self.__dict__.get("_plateau_hf")
                if loggers is None:
                    from . import _loggers
                    loggers = self.__dict__["_plateau_hf"] = _loggers.HFLoggers()
                loggers.log(args, _collector(self).collect(), step)
        except Exception:
            pass

    def on_train_end(self, args, state, control, **kwargs):
        loggers = self.__dict__.get("_plateau_hf")
        if loggers is not None:
            loggers.close()

    def on_evaluate(self, args, state, control, **kwargs):
        _api().mark("evaluate at step %s" % (getattr(state, "global_step", "?"),))

    def on_epoch_begin(self, args, state, control, **kwargs):
        _api().mark("epoch %s" % (getattr(state, "epoch", "?"),))

    doc = ("plateau's callback for transformers.Trainer: plateau.step() at on_step_end (once per optimizer step), "
           "a mark at on_evaluate and at each epoch, and every logging_steps plateau's per-step memory and live "
           "verdict to the loggers report_to names (TensorBoard, W&B; log=False: none). "
           "Usage: Trainer(..., callbacks=[plateau.TrainerCallback()]).")
    return type("TrainerCallback", bases, {"__doc__": doc, "__module__": "plateau", "__init__": _init,
                                           "on_step_end": on_step_end, "on_train_end": on_train_end,
                                           "on_evaluate": on_evaluate, "on_epoch_begin": on_epoch_begin})


def make_LightningCallback():
    base = _import_first(["lightning.pytorch:Callback", "pytorch_lightning:Callback"])
    bases = (base,) if base is not None else (_NoOpHooks,)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args, **kwargs):
        """Lightning calls this per batch; trainer.global_step moves once per optimizer step (accumulation too)."""
        g = getattr(trainer, "global_step", None)
        last = self.__dict__.get("_plateau_last_global_step")
        if g is not None and g != last:
            self.__dict__["_plateau_last_global_step"] = g
            if last is not None or g > 0:
                _api().step()
                if self.__dict__.get("_plateau_log", True) and _due(g, getattr(trainer, "log_every_n_steps", 1)):
                    try:
                        from . import _loggers
                        _loggers.lightning_log(trainer, _collector(self).collect(), g)
                    except Exception:
                        pass

    def on_train_epoch_start(self, trainer, pl_module, *args, **kwargs):
        _api().mark("epoch %s" % (getattr(trainer, "current_epoch", "?"),))

    def on_validation_start(self, trainer, pl_module, *args, **kwargs):
        _api().mark("validation-begin")

    def on_validation_end(self, trainer, pl_module, *args, **kwargs):
        _api().mark("validation-end")

    doc = ("plateau's callback for Lightning: plateau.step() once per optimizer step (when trainer.global_step "
           "moves), marks around validation and at each epoch, and every log_every_n_steps plateau's per-step "
           "memory and live verdict to each of trainer.loggers (log=False: none). "
           "Usage: Trainer(callbacks=[plateau.LightningCallback()]).")
    return type("LightningCallback", bases, {"__doc__": doc, "__module__": "plateau", "__init__": _init,
                                             "on_train_batch_end": on_train_batch_end,
                                             "on_train_epoch_start": on_train_epoch_start,
                                             "on_validation_start": on_validation_start,
                                             "on_validation_end": on_validation_end})
