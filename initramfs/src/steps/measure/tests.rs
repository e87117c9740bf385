//! The measure step's tests: units, clocks, the figures' sanity checks.

use super::*;

#[test]
fn medians_and_spread() {
    assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    assert!(median(&[]).is_nan());
    assert_eq!(mad(&[1.0, 2.0, 3.0, 4.0, 100.0]), 1.0);
}

#[test]
fn timer_runs_past_the_duration_and_divides_by_the_operations() {
    for tick in [Duration::from_nanos(50), Duration::from_millis(4)] {
        let started = Instant::now();
        let mut n = 0u32;
        let cost = Timer { tick }.run(Duration::from_millis(20), || {
            n += 1;
            std::thread::sleep(Duration::from_micros(200));
            Ok(())
        });
        let cost = cost.unwrap();
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(20), "{tick:?}");
        // Each operation sleeps 200 us at least, and the timed window lies inside this
        // test's, give or take a tick: bounds that hold however loaded the host is.
        let most = (elapsed + tick).as_nanos() as f64 / f64::from(n);
        assert!((200_000.0..=most).contains(&cost), "{tick:?}: {cost} ns per operation, at most {most}");
        assert!(n >= 1, "{n} operations");
    }
    let failing = Timer { tick: clock_tick() }.run(Duration::from_millis(5), || Err("no".to_string()));
    assert_eq!(failing, Err("no".to_string()));
}

#[test]
fn the_fine_clock_keeps_time_with_the_kernel_clock() {
    // A 4 ms tick makes x86_64 calibrate the TSC; elsewhere it is the kernel clock.
    for tick in [Duration::ZERO, Duration::from_millis(4)] {
        let clock = FineClock::new(tick);
        let (t, i) = (clock.now_ns(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (fine, kernel) = (clock.now_ns() - t, i.elapsed().as_nanos() as f64);
        assert!((fine / kernel - 1.0).abs() < 0.1, "{tick:?}: {fine} ns against {kernel} ns");
    }
}

#[test]
fn formats_split_large_payloads() {
    assert_eq!(event_format("e", 0), "e");
    assert_eq!(event_format("e", 16), "e char[16] f0");
    assert_eq!(event_format("e", 4096), "e char[1024] f0; char[1024] f1; char[1024] f2; char[1024] f3");
    assert_eq!(event_format("e", 1500), "e char[1024] f0; char[476] f1");
}

#[test]
fn units_turn_costs_into_figures() {
    assert_eq!(in_unit(MeasureKind::Write, 1000.0), 1e6);
    assert_eq!(in_unit(MeasureKind::Fork, 250_000.0), 250.0);
    assert_eq!(in_unit(MeasureKind::EnableCheck, 2.0), 2.0);
}

/// Real calls on the host: the baselines measure, and a fork with no enablers runs.
#[test]
fn baselines_measure_real_calls() {
    let req = Request {
        name: "t",
        what: MeasureKind::NullWrite,
        payload: 16,
        consumers: Consumers::None,
        vectored: true,
        enablers: 0,
        reps: 5,
        duration: Duration::from_millis(2),
    };
    let (figure, ratio) = Bench::new(&req).measure(&req).unwrap();
    assert_eq!((figure.samples.len(), figure.unit.as_str()), (5, "writes/s"));
    assert!(figure.value > 0.0 && figure.samples.iter().all(|s| *s > 0.0), "{figure:?}");
    let ratio = ratio.unwrap();
    assert_eq!((ratio.name.as_str(), ratio.samples.len()), ("t.ratio", 5));
    let fork = Request { what: MeasureKind::Fork, ..req };
    let (figure, ratio) = Bench::new(&fork).measure(&fork).unwrap();
    assert_eq!(figure.unit, "us");
    assert!(figure.value > 0.0 && ratio.unwrap().value > 0.0);
}

#[test]
fn too_few_repetitions_fail() {
    let req = Request {
        name: "t",
        what: MeasureKind::Syscall,
        payload: 0,
        consumers: Consumers::None,
        vectored: false,
        enablers: 0,
        reps: 4,
        duration: Duration::from_millis(1),
    };
    let mut said = vec![];
    assert_eq!(run(&req, &mut |t| said.push(t.to_string())), StepOutcome::Fail);
    assert!(said[0].contains("at least 5"), "{said:?}");
}
