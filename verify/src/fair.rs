//! A bounded queue that serves its classes round robin: one job of each class that has
//! any in turn, first in first out within a class.
//!
//! Owns: [`FairQueue`] and its bounds (jobs per class, jobs in all). The verification pool
//! queues its jobs in one, with the cohort as the class, so a cohort that floods the broker
//! gets one turn in every round like any other cohort instead of a place in a line that a
//! quiet cohort's job waits at the end of; the broker's cores apply finished results from one
//! the same way. What a flooding class gets: everything the other classes leave, and at
//! least its turn in each round (with `k` classes waiting, a `1/k` share of the jobs served).
//!
//! Never: blocks, reads a clock or knows what a job or a class is: a class is any `u64` the
//! caller picks, and a job any value.

use std::collections::{HashMap, VecDeque};

/// Why [`FairQueue::push`] refused a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The queue holds its total bound.
    Total,
    /// The job's class holds its per-class bound.
    Class,
}

/// A refused job, handed back with the bound it met.
#[derive(Debug)]
pub struct Refused<J> {
    pub job: J,
    pub bound: Bound,
}

/// The queue; see the module documentation.
#[derive(Debug)]
pub struct FairQueue<J> {
    classes: HashMap<u64, VecDeque<J>>,
    /// The classes with jobs, in the order they are served; each appears once.
    ring: VecDeque<u64>,
    len: usize,
    total_max: usize,
    class_max: usize,
}

impl<J> FairQueue<J> {
    /// An empty queue holding at most `total_max` jobs, at most `class_max` of one class.
    ///
    /// # Panics
    /// If either bound is zero (a caller bug: the pool's config validation excludes it).
    pub fn new(total_max: usize, class_max: usize) -> Self {
        assert!(total_max > 0 && class_max > 0, "a fair queue holds a job");
        Self {
            classes: HashMap::new(),
            ring: VecDeque::new(),
            len: 0,
            total_max,
            class_max,
        }
    }

    /// Jobs queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no job is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Classes with jobs queued.
    pub fn classes(&self) -> usize {
        self.ring.len()
    }

    /// Queues `job` at the end of its class, or hands it back at a bound.
    pub fn push(&mut self, class: u64, job: J) -> Result<(), Refused<J>> {
        if self.len >= self.total_max {
            return Err(Refused {
                job,
                bound: Bound::Total,
            });
        }
        let jobs = self.classes.entry(class).or_default();
        if jobs.len() >= self.class_max {
            return Err(Refused {
                job,
                bound: Bound::Class,
            });
        }
        if jobs.is_empty() {
            self.ring.push_back(class);
        }
        jobs.push_back(job);
        self.len += 1;
        Ok(())
    }

    /// The oldest job of the class whose turn it is, with its class; that class goes to
    /// the end of the round if it has more.
    pub fn pop(&mut self) -> Option<(u64, J)> {
        let class = self.ring.pop_front()?;
        let jobs = self
            .classes
            .get_mut(&class)
            .expect("a class in the ring has jobs");
        let job = jobs.pop_front().expect("a class in the ring has jobs");
        if jobs.is_empty() {
            self.classes.remove(&class);
        } else {
            self.ring.push_back(class);
        }
        self.len -= 1;
        Some((class, job))
    }

    /// Removes every job of `class` that `cancelled` picks, and returns them in queue order.
    pub fn cancel(&mut self, class: u64, mut cancelled: impl FnMut(&J) -> bool) -> Vec<J> {
        let Some(jobs) = self.classes.get_mut(&class) else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        let mut kept = VecDeque::with_capacity(jobs.len());
        for job in jobs.drain(..) {
            if cancelled(&job) {
                removed.push(job);
            } else {
                kept.push_back(job);
            }
        }
        self.len -= removed.len();
        if kept.is_empty() {
            self.classes.remove(&class);
            self.ring.retain(|queued| *queued != class);
        } else {
            *jobs = kept;
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain<J>(queue: &mut FairQueue<J>) -> Vec<(u64, J)> {
        std::iter::from_fn(|| queue.pop()).collect()
    }

    #[test]
    fn classes_take_turns_and_each_keeps_its_order() {
        let mut queue = FairQueue::new(100, 100);
        // A flood of class 1 queued first, then two jobs of class 2 and one of class 3.
        for job in 0..6 {
            queue.push(1, job).expect("room");
        }
        queue.push(2, 100).expect("room");
        queue.push(2, 101).expect("room");
        queue.push(3, 200).expect("room");
        assert_eq!(queue.len(), 9);
        assert_eq!(queue.classes(), 3);
        assert_eq!(
            drain(&mut queue),
            [
                (1, 0),
                (2, 100),
                (3, 200),
                (1, 1),
                (2, 101),
                (1, 2),
                (1, 3),
                (1, 4),
                (1, 5)
            ]
        );
        assert!(queue.is_empty());
        assert_eq!(queue.classes(), 0);
    }

    /// However long one class's line is, a job of a class that arrives later waits for at
    /// most one job of every other class.
    #[test]
    fn a_late_job_waits_at_most_one_round() {
        let mut queue = FairQueue::new(10_000, 10_000);
        for job in 0..5_000 {
            queue.push(job % 4, job as u32).expect("room");
        }
        queue.pop();
        queue.push(99, 7).expect("room");
        let position = std::iter::from_fn(|| queue.pop())
            .position(|(class, _)| class == 99)
            .expect("served");
        assert!(position <= 4, "served after {position} others");
    }

    #[test]
    fn bounds_refuse_and_hand_the_job_back() {
        let mut queue = FairQueue::new(3, 2);
        queue.push(1, 10).expect("room");
        queue.push(1, 11).expect("room");
        let refused = queue.push(1, 12).expect_err("class bound");
        assert_eq!((refused.job, refused.bound), (12, Bound::Class));
        queue.push(2, 20).expect("another class has room");
        let refused = queue.push(3, 30).expect_err("total bound");
        assert_eq!((refused.job, refused.bound), (30, Bound::Total));
        assert_eq!(queue.len(), 3);
        queue.pop();
        queue.push(3, 30).expect("room again");
    }

    #[test]
    fn cancel_removes_only_the_picked_jobs_of_one_class() {
        let mut queue = FairQueue::new(100, 100);
        for job in 0..6u64 {
            queue.push(job % 2, job).expect("room");
        }
        let removed = queue.cancel(0, |job| *job >= 2);
        assert_eq!(removed, [2, 4]);
        assert_eq!(queue.len(), 4);
        assert!(queue.cancel(7, |_| true).is_empty(), "an unknown class");
        // A class emptied by a cancel leaves the round.
        assert_eq!(queue.cancel(0, |_| true), [0]);
        assert_eq!(queue.classes(), 1);
        assert_eq!(drain(&mut queue), [(1, 1), (1, 3), (1, 5)]);
    }
}
