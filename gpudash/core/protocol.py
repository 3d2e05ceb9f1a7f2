"""Small picklable messages that cross the process boundary, and the interface listeners use.

Never imports torch or textual: the CLI, the recorder and the TUI all import this.

Data flow: the parent sends *controls* to the workload child; the child sends back
*samples* (a few per second) and *events* (something changed, failed or started). The
parent's NVML thread produces *GPU samples*. Listeners (the recorder, the TUI) see all
three through an ``EngineSource``.

This module is the one place to import them from; each lives in the module of its job:
``run_config`` (``RunConfig``), ``exit_code`` (``ExitCode``), ``controls`` (parent → child),
``samples`` and ``events`` (child → parent), ``gpu_messages`` (NVML's, in the parent) and
``source`` (``EngineSource``, ``SourceInfo``, ``Message``). Each name is re-exported as
``from … import X as X``: one import line a name.
"""

from __future__ import annotations

from gpudash.core.controls import ConfigChange as ConfigChange
from gpudash.core.controls import Control as Control
from gpudash.core.controls import Diagnose as Diagnose
from gpudash.core.controls import LossEffect as LossEffect
from gpudash.core.controls import MeasureScaling as MeasureScaling
from gpudash.core.controls import MemoryPeak as MemoryPeak
from gpudash.core.controls import Pause as Pause
from gpudash.core.controls import Resume as Resume
from gpudash.core.controls import SetBatchSize as SetBatchSize
from gpudash.core.controls import SetKnob as SetKnob
from gpudash.core.controls import SetKnobs as SetKnobs
from gpudash.core.controls import SetVariant as SetVariant
from gpudash.core.controls import StepWindow as StepWindow
from gpudash.core.controls import Stop as Stop
from gpudash.core.controls import SwitchWorkload as SwitchWorkload
from gpudash.core.controls import TimeStages as TimeStages
from gpudash.core.controls import TraceWindow as TraceWindow
from gpudash.core.events import CHECKPOINT as CHECKPOINT
from gpudash.core.events import COMPILE as COMPILE
from gpudash.core.events import DIAGNOSIS as DIAGNOSIS
from gpudash.core.events import ENDING_KINDS as ENDING_KINDS
from gpudash.core.events import EVALUATION as EVALUATION
from gpudash.core.events import FLOPS as FLOPS
from gpudash.core.events import GOODPUT as GOODPUT
from gpudash.core.events import LOSS_EFFECT as LOSS_EFFECT
from gpudash.core.events import MEMORY as MEMORY
from gpudash.core.events import MEMORY_PEAK as MEMORY_PEAK
from gpudash.core.events import NOT_RESPONDING as NOT_RESPONDING
from gpudash.core.events import NOT_THE_JOBS as NOT_THE_JOBS
from gpudash.core.events import NVML_LOST as NVML_LOST
from gpudash.core.events import OTHER as OTHER
from gpudash.core.events import OUT_OF_MEMORY as OUT_OF_MEMORY
from gpudash.core.events import PHASES as PHASES
from gpudash.core.events import PROCESSES as PROCESSES
from gpudash.core.events import PROFILING as PROFILING
from gpudash.core.events import REFUSED as REFUSED
from gpudash.core.events import SAMPLES_DROPPED as SAMPLES_DROPPED
from gpudash.core.events import STALLED_PHASE as STALLED_PHASE
from gpudash.core.events import STARTUP as STARTUP
from gpudash.core.events import STEPS_COUNTED as STEPS_COUNTED
from gpudash.core.events import SUSPENDED as SUSPENDED
from gpudash.core.events import TEARDOWN as TEARDOWN
from gpudash.core.events import TRACE as TRACE
from gpudash.core.events import TRACEBACK as TRACEBACK
from gpudash.core.events import TRAINING as TRAINING
from gpudash.core.events import WINDOWS_PACED as WINDOWS_PACED
from gpudash.core.events import WORLD as WORLD
from gpudash.core.events import Event as Event
from gpudash.core.events import EventKind as EventKind
from gpudash.core.exit_code import ExitCode as ExitCode
from gpudash.core.gpu_messages import MIG_FIGURES as MIG_FIGURES
from gpudash.core.gpu_messages import GpuInfo as GpuInfo
from gpudash.core.gpu_messages import GpuReading as GpuReading
from gpudash.core.gpu_messages import GpuSample as GpuSample
from gpudash.core.gpu_messages import MigReading as MigReading
from gpudash.core.run_config import JOB_PREFIX as JOB_PREFIX
from gpudash.core.run_config import RunConfig as RunConfig
from gpudash.core.samples import RankSample as RankSample
from gpudash.core.samples import Sample as Sample
from gpudash.core.samples import SyncSites as SyncSites
from gpudash.core.samples import config_key as config_key
from gpudash.core.source import EngineSource as EngineSource
from gpudash.core.source import Message as Message
from gpudash.core.source import SourceInfo as SourceInfo
