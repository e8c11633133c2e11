//! The post-work-wait analysis of Doerfler and Brightwell ("Measuring MPI
//! Send and Receive Overhead and Application Availability in High Performance
//! Network Interfaces"): from the points of one series (work time growing,
//! iteration time measured), the transfer time, the stop point, the overhead
//! and the application availability. The `overhead` kernel runs the same
//! logic to know when to stop; this is the analysis `tandem bench` reports.

use serde::Serialize;

/// One point of a series: the iteration time (post + work + wait) and the
/// time of the same work without messaging, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub iter_t: f64,
    pub work_t: f64,
}

/// Thresholds of the method.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// Points above `base` times the running transfer-time average end the
    /// averaging (Doerfler and Brightwell: 1.02 to 1.05).
    pub base: f64,
    /// The series stops once `confirm` points in a row are above `stop`
    /// times the transfer time (Doerfler and Brightwell: 1.5 to 2, one
    /// point).
    pub stop: f64,
    pub confirm: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            base: 1.03,
            stop: 1.5,
            confirm: 2,
        }
    }
}

/// What one series gives.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Analysis {
    /// Transfer time: equally weighted average of the iteration times
    /// before the first point above the base threshold.
    pub transfer_t: f64,
    /// Index of the point where the series stopped.
    pub stop_index: usize,
    /// Iteration time minus work time at the stop point.
    pub overhead: f64,
    /// 1 - overhead / transfer time, limited to [0, 1] (an overhead larger
    /// than the transfer time leaves nothing for the application).
    pub availability: f64,
    /// The same without the limit.
    pub availability_raw: f64,
}

/// Analyses a series; `None` if it never reached the stop threshold (the
/// work did not grow far enough) or is empty.
pub fn analyse(points: &[Point], th: &Thresholds) -> Option<Analysis> {
    let first = points.first()?;
    let mut sum = first.iter_t;
    let mut count = 1usize;
    let mut base = first.iter_t;
    let mut open = true;
    let mut above = 0usize;
    for (i, p) in points.iter().enumerate().skip(1) {
        if open {
            if p.iter_t > th.base * base {
                open = false;
            } else {
                sum += p.iter_t;
                count += 1;
                base = sum / count as f64;
            }
        }
        above = if p.iter_t > th.stop * base {
            above + 1
        } else {
            0
        };
        if above >= th.confirm.max(1) {
            let overhead = p.iter_t - p.work_t;
            let raw = if base > 0.0 {
                1.0 - overhead / base
            } else {
                0.0
            };
            return Some(Analysis {
                transfer_t: base,
                stop_index: i,
                overhead,
                availability: raw.clamp(0.0, 1.0),
                availability_raw: raw,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic interface: transfer time `t`, host overhead `o`, work
    /// growing by `step` per point. While the work fits in the transfer
    /// time minus the overhead, the iteration takes the transfer time; past
    /// that it takes work + overhead.
    fn series(t: f64, o: f64, step: f64, n: usize) -> Vec<Point> {
        (0..n)
            .map(|i| {
                let w = i as f64 * step;
                Point {
                    iter_t: t.max(w + o),
                    work_t: w,
                }
            })
            .collect()
    }

    #[test]
    fn recovers_overhead_and_availability() {
        // 100 us transfer, 20 us overhead: availability 80%.
        let pts = series(100e-6, 20e-6, 5e-6, 100);
        let a = analyse(&pts, &Thresholds::default()).unwrap();
        assert!((a.transfer_t - 100e-6).abs() < 1e-12);
        assert!((a.overhead - 20e-6).abs() < 1e-12);
        assert!((a.availability - 0.8).abs() < 1e-9);
        // Stops at the second point above 150 us: work + 20 > 150 first at
        // work = 135 (point 27), confirmed at point 28.
        assert_eq!(a.stop_index, 28);
    }

    #[test]
    fn no_overlap_gives_zero_availability() {
        // All the transfer needs the host: iteration = transfer + work.
        let pts: Vec<Point> = (0..60)
            .map(|i| {
                let w = i as f64 * 5e-6;
                Point {
                    iter_t: 100e-6 + w,
                    work_t: w,
                }
            })
            .collect();
        let a = analyse(&pts, &Thresholds::default()).unwrap();
        assert!((a.overhead - 100e-6).abs() < 1e-9);
        assert!(a.availability.abs() < 1e-9);
        // The average closed at the first point (105 > 1.03 * 100).
        assert!((a.transfer_t - 100e-6).abs() < 1e-12);
    }

    #[test]
    fn base_average_is_equally_weighted_and_closes() {
        let p = |iter_t: f64| Point {
            iter_t,
            work_t: 0.0,
        };
        // 10, 10.2, 9.8 average to 10; 10.2 is within 1.03 * 10 and joins
        // (10.05); 11 > 1.03 * 10.05 closes the average.
        let pts = vec![
            p(10.0),
            p(10.2),
            p(9.8),
            p(10.2),
            p(11.0),
            p(10.0),
            p(16.0),
            p(16.0),
        ];
        let a = analyse(&pts, &Thresholds::default()).unwrap();
        assert!((a.transfer_t - 10.05).abs() < 1e-12, "{}", a.transfer_t);
        assert_eq!(a.stop_index, 7);
        // One disturbed point does not stop the series.
        let pts = vec![p(10.0), p(10.0), p(30.0), p(10.0), p(10.0)];
        assert!(analyse(&pts, &Thresholds::default()).is_none());
        // With confirm = 1 (Doerfler and Brightwell's rule) it does.
        let th = Thresholds {
            confirm: 1,
            ..Thresholds::default()
        };
        assert_eq!(analyse(&pts, &th).unwrap().stop_index, 2);
    }

    #[test]
    fn overhead_above_transfer_is_limited() {
        let pts = vec![
            Point {
                iter_t: 10.0,
                work_t: 0.0,
            },
            Point {
                iter_t: 20.0,
                work_t: 1.0,
            },
            Point {
                iter_t: 21.0,
                work_t: 2.0,
            },
        ];
        let a = analyse(&pts, &Thresholds::default()).unwrap();
        assert_eq!(a.availability, 0.0);
        assert!(a.availability_raw < 0.0);
        assert!(analyse(&[], &Thresholds::default()).is_none());
    }
}
