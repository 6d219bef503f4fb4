//! `CommConfig`'s parsing of the environment and its checks.

use super::*;

#[test]
fn secs_saturate_and_reject() {
    assert_eq!(parse_secs("T", "1.5").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse_secs("T", " 1e30 ").unwrap(), Duration::MAX);
    assert_eq!(parse_secs("T", "inf").unwrap(), Duration::MAX);
    for bad in ["0", "-1", "-inf", "NaN", "", "ten", "1e-12"] {
        let e = parse_secs("T", bad).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{bad}");
        assert!(e.message().contains('T'), "names the variable: {e}");
    }
}

#[test]
fn environment_saturates_huge_timeouts() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        CommConfig::from_lookup(move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    };
    let c = env(&[("RUCCL_TIMEOUT", "1e30"), ("RUCCL_WARN_AFTER", "2.5")]).unwrap();
    assert_eq!(c.timeout(), Duration::MAX);
    assert_eq!(c.warn_after(), Duration::from_millis(2500));
    assert_eq!(env(&[]).unwrap(), CommConfig::default());
    assert_eq!(env(&[("RUCCL_PEER_SILENCE", "0.5")]).unwrap().peer_silence(), Duration::from_millis(500));
    assert!(env(&[("RUCCL_PEER_SILENCE", "0")]).unwrap_err().message().contains("RUCCL_PEER_SILENCE"));
    for bad in ["-3", "nan", "0"] {
        let vars: &'static [(&str, &str)] = Box::leak(Box::new([("RUCCL_TIMEOUT", bad)]));
        let e = env(vars).unwrap_err();
        assert!(e.message().contains("RUCCL_TIMEOUT"), "{e}");
    }
    let e = env(&[("RUCCL_WARN_AFTER", "-1")]).unwrap_err();
    assert!(e.message().contains("RUCCL_WARN_AFTER"), "{e}");
}

#[test]
fn yes_no_variables_are_strict() {
    let env = |name: &'static str, v: &'static str| CommConfig::from_lookup(move |k| (k == name).then(|| v.into()));
    for name in ["RUCCL_SHARED_PROGRESS", "RUCCL_SHM_DISABLE", "RUCCL_SHM_SLOTS", "RUCCL_SHM_CMA"] {
        for good in ["1", "0", "TRUE", " off ", "Yes", "no", ""] {
            assert!(env(name, good).is_ok(), "{name}={good:?}");
        }
        for bad in ["2", "banana", "maybe", "tru"] {
            let e = env(name, bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert!(e.message().contains(name), "names the variable: {e}");
        }
    }
    assert!(env("RUCCL_SHARED_PROGRESS", "On").unwrap().shared_progress());
    assert!(!env("RUCCL_SHARED_PROGRESS", "").unwrap().shared_progress());
    assert_eq!(parse_flag("X", " TRUE ").unwrap(), Some(true));
    assert_eq!(parse_flag("X", "Off").unwrap(), Some(false));
    assert_eq!(parse_flag("X", " ").unwrap(), None);
}

/// A zero timeout or peer silence from the builder is refused where a communicator is
/// made, as the same value from the environment is where it is read.
#[test]
fn zero_waits_are_refused_from_the_builder_too() {
    use crate::{Communicator, ErrorKind, HostDevice};
    for (cfg, what) in [
        (CommConfig::default().with_timeout(Duration::ZERO), "with_timeout"),
        (CommConfig::default().with_peer_silence(Duration::ZERO), "with_peer_silence"),
    ] {
        let Err(e) = Communicator::init_all(vec![HostDevice::default(); 2], cfg.clone()) else {
            panic!("{what}(0) accepted by init_all")
        };
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(&format!("CommConfig::{what} is zero")), "{e}");
        assert_eq!(e.context().op.as_deref(), Some("Communicator::new"), "{e}");
        let id = crate::UniqueId::new().unwrap();
        let Err(e) = Communicator::with_config(HostDevice::default(), 1, id, 0, cfg) else {
            panic!("{what}(0) accepted by with_config")
        };
        assert_eq!((e.kind(), e.context().rank), (ErrorKind::InvalidArgument, Some(0)), "{e}");
    }
}

#[test]
fn deadlines_saturate() {
    let now = Instant::now();
    let far = deadline_after(Duration::MAX);
    assert!(far >= now + Duration::from_secs(50 * 365 * 24 * 3600), "{:?}", far - now);
    let near = deadline_after(Duration::from_secs(1));
    assert!(near >= now + Duration::from_secs(1) && near < far);
    assert!(deadline_after(Duration::ZERO) <= Instant::now());
}

/// An empty or blank value is the default, for every variable alike (a flag's empty value
/// was the default while `RUCCL_TIMEOUT=` was an error).
#[test]
fn empty_values_are_unset() {
    for name in [
        "RUCCL_TIMEOUT",
        "RUCCL_WARN_AFTER",
        "RUCCL_ALGO",
        "RUCCL_TRANSPORT",
        "RUCCL_CHUNK_BYTES",
        "RUCCL_PEER_SILENCE",
        "RUCCL_SHARED_PROGRESS",
        "RUCCL_SHM_DISABLE",
        "RUCCL_SHM_SLOTS",
        "RUCCL_SHM_CMA",
    ] {
        for v in ["", " ", "\t"] {
            let c = CommConfig::from_lookup(move |k| (k == name).then(|| v.to_string()));
            assert_eq!(c.ok(), Some(CommConfig::default()), "{name}={v:?}");
        }
    }
}

/// A peer-silence limit below the least is refused from the environment and the builder
/// alike, naming the value (1 ms lost every peer at the first op, and the message then
/// quoted the 60 s default).
#[test]
fn a_peer_silence_below_the_least_is_refused() {
    let env = |v: &'static str| CommConfig::from_lookup(move |k| (k == "RUCCL_PEER_SILENCE").then(|| v.into()));
    let e = env("0.001").unwrap_err();
    assert!(
        e.message().contains("RUCCL_PEER_SILENCE=\"0.001\": a peer-silence limit of 1ms is below the least, 100ms"),
        "{e}"
    );
    assert!(env("0.1").is_ok());
    let e = CommConfig::default().with_peer_silence(Duration::from_millis(20)).check().unwrap_err();
    assert!(e.message().contains("CommConfig::with_peer_silence: a peer-silence limit of 20ms"), "{e}");
    assert!(CommConfig::default().with_peer_silence(MIN_PEER_SILENCE).check().is_ok());
}
