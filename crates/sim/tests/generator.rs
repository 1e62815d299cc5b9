//! The workload generator is reproducible from its seed and follows its spec.

use iosets_sim::workload::{Arrivals, Assign, Sizes, WorkloadSpec, DEFAULT_PARETO_ALPHA};
use iosets_types::{ClassId, JobId, Nanos, Priority};

fn spec(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        sizes: Sizes::BoundedPareto {
            min: 4096,
            max: 4 << 20,
            alpha: DEFAULT_PARETO_ALPHA,
        },
        arrivals: Arrivals::Poisson { rate_per_s: 500.0 },
        priorities: vec![Priority::new(0.1).unwrap(), Priority::new(0.01).unwrap()],
        classes: vec![ClassId(7), ClassId(8)],
        seed,
        ..WorkloadSpec::new(2, 2000)
    }
}

#[test]
fn same_seed_same_workload() {
    assert_eq!(spec(42).generate().unwrap(), spec(42).generate().unwrap());
}

#[test]
fn different_seeds_differ() {
    assert_ne!(spec(1).generate().unwrap(), spec(2).generate().unwrap());
}

#[test]
fn per_job_priorities_and_classes_are_attached() {
    for r in spec(3).generate().unwrap() {
        let j = r.job.0 as usize;
        assert!(j == 1 || j == 2);
        assert_eq!(r.priority, spec(3).priorities.get(j - 1).copied());
        assert_eq!(r.class, Some(ClassId(6 + j as u64)));
    }
}

#[test]
fn random_assignment_is_roughly_uniform_and_round_robin_exact() {
    let w = WorkloadSpec {
        seed: 9,
        ..WorkloadSpec::new(4, 4000)
    }
    .generate()
    .unwrap();
    for j in 1..=4 {
        let n = w.iter().filter(|r| r.job == JobId(j)).count();
        assert!((850..1150).contains(&n), "job {j} got {n} of 4000");
    }
    assert!(w
        .iter()
        .all(|r| r.arrival == Nanos::ZERO && (1..=1000).contains(&r.len)));
    let rr = WorkloadSpec {
        assign: Assign::RoundRobin,
        ..WorkloadSpec::new(4, 8)
    }
    .generate()
    .unwrap();
    let jobs: Vec<u64> = rr.iter().map(|r| r.job.0).collect();
    assert_eq!(jobs, vec![1, 2, 3, 4, 1, 2, 3, 4]);
}
