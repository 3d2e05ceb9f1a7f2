"""What torch's own functions tell gpudash's hooks inside a job about what it does between its steps
(``hooks.py`` puts them in), passed on to the span keeper
(``phases.Phases``): ``Module.train`` (``model.eval()`` is ``train(False)``; only the
outermost call, not its calls on each child) and ``inference_mode`` blocks; the first
``optimizer.step()`` call's start (an optimizer step pre-hook, until the first step); the saves of
``SAVES``'s modules, timed as a checkpoint, those loaded now and the others as they are imported
(``imports.ImportWatch``); a call of ``torch.compile`` (the span keeper's forward watch
off for good, the compile watch installed) and dynamo's compiling, once dynamo is loaded. Everything
it replaced is put back by ``uninstall``. Standard library and the job's torch only.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from .frames import hidden
from .imports import ImportWatch
from .phases import CHECKPOINT, COMPILE

HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep  # gpudash's hooks: their wrappers' frames
CONTEXTLIB = os.path.join("torch", "utils", "_contextlib.py")  # torch's helper that a decorator's block runs in
SAVES = {  # module -> its functions that write a checkpoint
    "torch": ("save",),
    "torch.serialization": ("save",),
    "safetensors.torch": ("save_file", "save"),
    "torch.distributed.checkpoint": ("save", "async_save", "save_state_dict"),
}


class PhaseSignals:
    """torch's functions wrapped to tell ``phases`` (a ``phases.Phases``) what the job does."""

    def __init__(self, phases: Any) -> None:
        self.phases = phases
        self.mode_depth = 0  # inside Module.train (it calls itself on each child)
        self.save_depth = 0
        self.compile_watched = False
        self.wrapped: set[int] = set()  # the save functions put in place (torch.save is torch.serialization.save)
        self._originals: list[tuple[Any, str, Any]] = []  # (owner, name, what was there) to put back
        self._saves_watch: Any = None  # imports.ImportWatch of SAVES's modules, once installed
        self.compiles: Any = None  # compile_watch.CompileWatch: told when the job compiles, and each compile's end

    def install(self, torch: Any) -> None:
        """Module.train, inference_mode and the save functions of the modules loaded now; the
        others as they are imported."""
        phases, signals = self.phases, self
        module_cls = torch.nn.Module
        original_train = module_cls.train

        @functools.wraps(original_train)
        def train(module: Any, mode: bool = True) -> Any:
            signals.mode_depth += 1
            try:
                return original_train(module, mode)
            finally:
                signals.mode_depth -= 1
                if signals.mode_depth == 0:
                    phases.mode(bool(mode))

        module_cls.train = hidden(train)
        inference = torch.inference_mode
        enter, exit_ = inference.__enter__, inference.__exit__

        inside_torch = os.path.dirname(torch.__file__) + os.sep

        def inference_enter(ctx: Any) -> Any:
            if not torch_internal(inside_torch):  # (fake tensors, compiling: torch's own, not an evaluation)
                phases.inference(True)
            return enter(ctx)

        def inference_exit(ctx: Any, *exc: Any) -> Any:
            if not torch_internal(inside_torch):
                phases.inference(False)
            return exit_(ctx, *exc)

        inference.__enter__, inference.__exit__ = hidden(inference_enter), hidden(inference_exit)
        self._originals += [(module_cls, "train", original_train), (inference, "__enter__", enter)]
        self._originals.append((inference, "__exit__", exit_))
        phases.watch_forwards(torch)
        self._watch_first_step(torch)
        self._watch_compile_calls(torch)
        for name in SAVES:
            if name in sys.modules:
                self._wrap_saves(sys.modules[name])
        self._saves_watch = ImportWatch(SAVES, self._wrap_saves)  # each module of SAVES wrapped as it is imported
        sys.meta_path.insert(0, self._saves_watch)

    def uninstall(self) -> None:
        self.phases.stop_forward_watch()
        hook, self.phases.until_first = self.phases.until_first, None
        if hook is not None:
            hook.remove()
        for owner, name, original in self._originals:
            setattr(owner, name, original)
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self._saves_watch]

    def _watch_first_step(self, torch: Any) -> None:
        """Until the first step: when its ``optimizer.step()`` call began (the span keeper removes
        the hook then). The time inside it is training, not start-up: a closure's evaluations."""
        import importlib

        optimizer = importlib.import_module("torch.optim.optimizer")  # (torch.optim drops the attribute)
        register = getattr(optimizer, "register_optimizer_step_pre_hook", None)
        if register is not None:
            phases = self.phases
            phases.until_first = register(lambda *_: phases.optimizer_step_began())

    def _watch_compile_calls(self, torch: Any) -> None:
        """``torch.compile`` noted: the forward watch is off for good, since a global module hook in
        compiled code would break its graph or recompile it."""
        original = note_compile(torch, self._compiling)
        if original is not None:
            self._originals.append((torch, "compile", original))

    def _compiling(self) -> None:
        self.phases.stop_forward_watch()
        if self.compiles is not None:  # dynamo is loaded: its compiles and graph breaks heard from the first
            self.compiles.compile_called()

    def _wrap_saves(self, module: Any) -> None:
        for name in SAVES.get(module.__name__, ()):
            original = getattr(module, name, None)
            if original is None or id(original) in self.wrapped:
                continue
            wrapped = hidden(self._timed_save(original))
            self.wrapped.add(id(wrapped))
            setattr(module, name, wrapped)
            self._originals.append((module, name, original))

    def _timed_save(self, original: Any) -> Any:
        phases, signals = self.phases, self

        @functools.wraps(original)
        def save(*args: Any, **kwargs: Any) -> Any:
            signals.save_depth += 1
            if signals.save_depth == 1:
                phases.begin(CHECKPOINT)
            try:
                return original(*args, **kwargs)
            finally:
                signals.save_depth -= 1
                if signals.save_depth == 0:
                    phases.end(CHECKPOINT)

        return save

    def watch_compile(self) -> None:
        """At a step boundary: once torch.compile has loaded dynamo, its compile callbacks."""
        if self.compile_watched or "torch._dynamo.callback" not in sys.modules:
            return
        self.compile_watched = True
        handler = getattr(sys.modules["torch._dynamo.callback"], "callback_handler", None)
        if handler is None or not hasattr(handler, "register_start_callback"):
            return
        phases = self.phases
        handler.register_start_callback(lambda *_: phases.begin(COMPILE))
        handler.register_end_callback(lambda *_: phases.end(COMPILE))


def torch_internal(inside_torch: str) -> bool:
    """The ``inference_mode`` block being entered or left is torch's own (its first caller outside
    gpudash's wrappers and torch's decorator helper lies inside torch): a fake tensor made, a graph
    compiled; never the job's evaluation (a ``@torch.inference_mode()`` function of the job's is its)."""
    frame: Any = sys._getframe(2)
    while frame is not None and (
        frame.f_code.co_filename.endswith(CONTEXTLIB) or frame.f_code.co_filename.startswith(HERE)
    ):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(inside_torch)


def note_compile(
    torch: Any, note: Callable[[], None], then: Callable[[Any, Any, dict[str, Any]], Any] | None = None
) -> Any:
    """Wrap ``torch.compile`` (``nn.Module.compile`` calls it too) so that ``note()`` runs first at
    each call: the job compiles; and ``then(compiled, target, its keyword arguments)`` after it (its
    failure unsaid), whose answer, where not None, is what the job gets in place of ``compiled`` (a
    wrapper that watches its calls). The original, to put back (None: this torch has none)."""
    original = getattr(torch, "compile", None)
    if original is None:
        return None

    @functools.wraps(original)
    def compile(*args: Any, **kwargs: Any) -> Any:  # noqa: A001 - the name it replaces
        note()
        compiled = original(*args, **kwargs)
        if then is not None:
            try:
                instead = then(compiled, args[0] if args else kwargs.get("model"), kwargs)
            except Exception:  # noqa: BLE001 - the job's compile must not fail for gpudash
                instead = None
            return compiled if instead is None else instead
        return compiled

    torch.compile = hidden(compile)
    return original
