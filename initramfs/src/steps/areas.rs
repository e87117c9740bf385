//! The steps of the leaf areas, each area's variants taken apart into its module's calls:
//! files, user_events, perf, eBPF, trace reads, measures, sync. None of them runs other steps;
//! the dispatcher (`steps::run_step`) sends each step of these areas here in one line.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use protocol::steps::{
    Barrier, BpfAttach, BpfCount, BpfProg, BpfRawTracepoint, CheckBit, CheckWord, Close, Credentials, Delete, Dup,
    Dup2, Fuzz, Ioctl, Measure, Memory, Mkdir, Open, PageFaultsHeld, PerfControl, PerfFilter, PerfOpen, PerfRead, Pin,
    ReadFile, Register, RegisterUntil, Rmdir, SetWord, Stat, TraceRead, Unregister, Write,
};
use protocol::Step;

use super::{bpf, measure, perf, ringbuf, sync};
use crate::steps::files::{self, Mode};
use crate::steps::outcome::{finish, StepOutcome};
use crate::steps::perf::PerfEvents;
use crate::steps::state::ScenarioState;
use crate::steps::uevents::{self, Del, Payload, Reg, Unreg, UserEvents};

/// `write_file`, `read_file`, `stat`, `mkdir`, `rmdir`; `read_file` may compare with, or keep, the
/// contents kept by name.
pub fn files(step: &Step, kept: &mut HashMap<String, String>, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::WriteFile(w) => {
            let mode = Mode { create: w.create, append: w.append };
            files::write_file(Path::new(&w.path), w.payload(), mode, &w.expect, w.within_ms, say)
        }
        Step::ReadFile(r) => read_file(r, kept, say),
        Step::Stat(Stat { path, mode, uid, gid, expect }) => {
            files::stat(path, &files::Owner { mode: mode.as_deref(), uid: *uid, gid: *gid }, expect, say)
        }
        Step::Mkdir(Mkdir { path, expect }) => files::dir_call("mkdir", path, expect, say),
        Step::Rmdir(Rmdir { path, expect }) => files::dir_call("rmdir", path, expect, say),
        _ => unreachable!("not a files step"),
    }
}

/// `read_file`: compared with `equals` or a kept content; once every check holds, the content,
/// or the part of a line `keep_match` names, kept under `keep_as`.
fn read_file(r: &ReadFile, kept: &mut HashMap<String, String>, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let path = &r.path;
    let equals = match (&r.equals, &r.equals_kept) {
        (_, Some(name)) => match kept.get(name) {
            Some(text) => Some(text.as_str()),
            None => {
                say(&format!("read {path}: nothing was kept as {name}"));
                return StepOutcome::Fail;
            }
        },
        (equals, None) => equals.as_deref(),
    };
    let want = files::Want {
        head_hex: r.head_hex.as_deref(),
        equals,
        contains: &r.contains,
        lacks: &r.lacks,
        includes: &r.includes,
        excludes: &r.excludes,
    };
    let outcome = files::read(path, &want, &r.expect, r.within_ms, say);
    let (StepOutcome::Pass, Some(name)) = (outcome, &r.keep_as) else { return outcome };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            say(&format!("read {path}: reading it again to keep: {}", crate::runtime::sys::error_name(&e)));
            return StepOutcome::Fail;
        }
    };
    let text = match &r.keep_match {
        None => text,
        Some(template) => match text.lines().find_map(|l| protocol::steps::match_template(template, l)) {
            Some(value) => value.to_string(),
            None => {
                say(&format!("read {path}: no line is `{template}`, nothing to keep as {name}"));
                return StepOutcome::Fail;
            }
        },
    };
    say(&format!("read {path}: kept as {name}: {text:?}"));
    kept.insert(name.clone(), text);
    outcome
}

/// The user_events steps: descriptors, registrations, enable words, writes, the `fuzz` stream.
pub fn user_events(step: &Step, events: &mut UserEvents, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::Open(Open { fd, path, read_only, expect }) => finish(events.open(fd, path, *read_only, expect, say), say),
        Step::Close(Close { fd }) => finish(events.close(fd, say), say),
        Step::Dup(Dup { fd, to }) => finish(events.dup(fd, to, say), say),
        Step::Dup2(Dup2 { fd, number, to, expect }) => {
            finish(events.dup2(fd, *number, to.as_deref(), expect, say), say)
        }
        Step::Register(Register {
            fd,
            format,
            word,
            bit,
            size,
            flags,
            index_as,
            expect_index,
            raw,
            minor_faults,
            expect,
        }) => {
            let reg = Reg {
                fd,
                format,
                word: word.as_deref(),
                bit: *bit,
                size: *size,
                flags: *flags,
                index_as: index_as.as_deref(),
                expect_index: *expect_index,
                raw,
                minor_faults: *minor_faults,
            };
            finish(events.register(&reg, expect, say), say)
        }
        Step::Unregister(Unregister { fd, word, bit, raw, minor_faults, expect }) => {
            let unreg = Unreg { fd, word: word.as_deref(), bit: *bit, raw, minor_faults: *minor_faults };
            finish(events.unregister(&unreg, expect, say), say)
        }
        Step::Delete(Delete { fd, name, expect, within_ms, confirm, unterminated }) => {
            let del = Del { fd, name, within_ms: *within_ms, confirm: *confirm, unterminated: *unterminated };
            finish(events.delete(&del, expect, say), say)
        }
        Step::Ioctl(Ioctl { fd, cmd, arg, expect }) => finish(events.ioctl(fd, cmd, arg, expect, say), say),
        Step::SetWord(SetWord { word, value }) => finish(events.set_word(word, *value, say), say),
        Step::Memory(Memory { op, file }) => finish(events.memory(*op, file.as_deref(), say), say),
        Step::PageFaultsHeld(PageFaultsHeld { at_least, within_ms }) => {
            finish(events.page_faults_held(*at_least, *within_ms, say), say)
        }
        Step::CheckBit(CheckBit { word, bit, set, within_ms }) => {
            finish(events.check_bit(word, *bit, *set, *within_ms, say), say)
        }
        Step::CheckWord(CheckWord { word, value, or, within_ms }) => {
            finish(events.check_word(word, *value, or, *within_ms, say), say)
        }
        Step::Write(Write { fd, index, index_value, fields, vectored, offset, payload_from, expect }) => {
            let payload = Payload {
                index: index.as_deref(),
                index_value: *index_value,
                fields,
                vectored: *vectored,
                offset: *offset,
                from: payload_from.as_ref(),
            };
            finish(events.write(fd, &payload, expect, say), say)
        }
        Step::RegisterUntil(RegisterUntil { format, max, expect, hold_until_reboot }) => {
            let outcome = finish(events.register_until(format, *max, expect, say), say);
            if *hold_until_reboot {
                uevents::hold_descriptors_until_reboot(say);
            }
            outcome
        }
        Step::Fuzz(Fuzz { seed, iterations }) => crate::steps::fuzz::run(*seed, *iterations, say),
        _ => unreachable!("not a user_events step"),
    }
}

/// The perf steps: credentials, perf events opened, controlled, filtered and read.
pub fn perf(step: &Step, events: &mut PerfEvents, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::Credentials(Credentials { uid, gid, keep_caps }) => perf::credentials(*uid, *gid, keep_caps, say),
        Step::PerfOpen(PerfOpen { name, event, disabled, expect }) => {
            perf::open(events, name, event, *disabled, expect, say)
        }
        Step::PerfControl(PerfControl { name, action, expect }) => perf::control(events, name, *action, expect, say),
        Step::PerfFilter(PerfFilter { name, filter, expect }) => perf::filter(events, name, filter, expect, say),
        Step::PerfRead(PerfRead { name, samples, records, ip_in }) => {
            perf::read(events, name, samples.as_deref(), records.as_deref(), ip_in.as_deref(), say)
        }
        _ => unreachable!("not a perf step"),
    }
}

/// The eBPF steps: programs loaded, attached to a perf event or a raw tracepoint, counted.
pub fn bpf(step: &Step, state: &mut ScenarioState, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::BpfProg(BpfProg { name, kind, ctx_read, expect }) => {
            bpf::load(&mut state.bpf, name, *kind, *ctx_read, expect, say)
        }
        Step::BpfAttach(BpfAttach { prog, perf, expect }) => {
            bpf::attach(&state.bpf, &state.perf, prog, perf, expect, say)
        }
        Step::BpfRawTracepoint(BpfRawTracepoint { prog, tracepoint, expect }) => {
            bpf::raw_tracepoint(&state.bpf, &mut state.bpf_links, prog, tracepoint, expect, say)
        }
        Step::BpfCount(BpfCount { prog, equals }) => bpf::count(&state.bpf, prog, *equals, say),
        _ => unreachable!("not an eBPF step"),
    }
}

/// `barrier` and `pin`: where a scenario's threads and processes meet, and on which CPU.
pub fn sync(step: &Step, say: &mut dyn FnMut(&str)) -> StepOutcome {
    match step {
        Step::Barrier(Barrier { name, parties, within_ms }) => sync::barrier(name, *parties, *within_ms, say),
        Step::Pin(Pin { cpu }) => sync::pin(*cpu, say),
        _ => unreachable!("not a sync step"),
    }
}

/// `trace_read`: an event's records in the ring buffer, given all of them or one for every
/// record.
pub fn trace_read(step: &Step, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let Step::TraceRead(TraceRead { event, instance, records, every, at_most }) = step else {
        unreachable!("not a trace_read step")
    };
    let want = match (records, every) {
        (Some(records), None) => ringbuf::Expected::Records(records),
        (None, Some(record)) => ringbuf::Expected::Every { record, at_most: *at_most },
        _ => {
            say("trace read: takes `records` or `every`, one of them");
            return StepOutcome::Fail;
        }
    };
    ringbuf::read_step(event, instance.as_deref(), want, say)
}

/// `measure`: the cost of a user_events operation, timed.
pub fn measure(step: &Step, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let Step::Measure(Measure { name, what, payload, consumers, vectored, enablers, reps, duration_ms }) = step else {
        unreachable!("not a measure step")
    };
    let req = measure::Request {
        name,
        what: *what,
        payload: *payload,
        consumers: *consumers,
        vectored: *vectored,
        enablers: *enablers,
        reps: *reps,
        duration: Duration::from_millis(*duration_ms),
    };
    measure::run(&req, say)
}
