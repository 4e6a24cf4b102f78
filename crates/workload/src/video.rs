//! A video player: reads a video file frame by frame, sequentially, one read at a time, keeping a read-ahead buffer
//! of a few frames, and counts the frames whose data were not in memory by their display deadline as dropped (what
//! mplayer `-framedrop` reports in S's `video_play_vs_comms.sh`; docs/BENCHMARKS.md, video).
//!
//! Timing model: the player starts reading at its start time `t0`; frame *i* (from 0) is due at
//! `t0 + (buffer_frames + i) / fps`, i.e. playback begins once a full buffer's worth of time has passed. A frame is
//! shown if its read completed at or before its deadline, dropped otherwise. Reading never skips data (a demuxer reads
//! the stream in order), so a player that fell behind reads late frames too and drops them. The player exits when the
//! last frame has been decided.
//!
//! Precisely: the buffer holds frames read but not yet due; frame *i* may be read once fewer than `buffer_frames`
//! frames are read and not yet due, one read at a time.

use crate::process::{Actions, Event, FileId, FlowSpec, IoMode, Op, Process, ProcessReport};
use bfq_sched::Time;
use std::collections::VecDeque;

use crate::fio::NS_PER_S;

/// Length of the clip S plays, ns (`mplayer -endpos 20s`, S@HEAD; docs/BENCHMARKS.md, video).
pub const S_CLIP_DURATION_NS: Time = 20 * NS_PER_S;
/// Where S starts playing, ns into the clip (`mplayer -ss 00:01:32`, S@HEAD).
pub const S_CLIP_START_NS: Time = 92 * NS_PER_S;
/// Frame rate of S's clip (a film trailer: 24 frames/s; estimate, the file's own rate is not recorded in S).
pub const S_CLIP_FPS: u32 = 24;
/// Bit rate of S's clip, bits/s (estimate for a 720p H.264 trailer; not recorded in S).
pub const S_CLIP_BITRATE_BPS: u64 = 4_000_000;
/// Default read-ahead buffer, frames (a demuxer keeps a few packets ahead of the decoder).
pub const DEFAULT_BUFFER_FRAMES: u32 = 4;

/// Settings of a video player.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoConfig {
    /// Flow name.
    pub name: String,
    /// The video file.
    pub file: FileId,
    /// Its size, bytes; reads wrap around at the end.
    pub file_size: u64,
    /// Byte offset of the first frame read (the seek position).
    pub start_offset: u64,
    /// Bit rate of the stream, bits/s; a frame is `bitrate / 8 / fps` bytes (at least 1).
    pub bitrate_bps: u64,
    /// Frames per second (0 is treated as 1).
    pub fps: u32,
    /// Frames to play.
    pub frames: u64,
    /// Read-ahead buffer, frames (0 is treated as 1).
    pub buffer_frames: u32,
    /// Buffered or direct reads.
    pub mode: IoMode,
}

impl VideoConfig {
    /// A player of `file` (`file_size` bytes) at `bitrate_bps` and `fps`, for `duration_ns`, starting at the
    /// beginning of the file, with the default buffer and buffered reads.
    pub fn new(
        name: impl Into<String>,
        file: FileId,
        file_size: u64,
        bitrate_bps: u64,
        fps: u32,
        duration_ns: Time,
    ) -> Self {
        let fps = fps.max(1);
        VideoConfig {
            name: name.into(),
            file,
            file_size,
            start_offset: 0,
            bitrate_bps,
            fps,
            frames: (u128::from(duration_ns) * u128::from(fps) / u128::from(NS_PER_S)) as u64,
            buffer_frames: DEFAULT_BUFFER_FRAMES,
            mode: IoMode::Buffered,
        }
    }

    /// S's setting: 20 s from 1:32 of the trailer (estimated 4 Mbit/s, 24 fps), buffered reads.
    pub fn s_default(file: FileId, file_size: u64) -> Self {
        let mut c = Self::new(
            "video",
            file,
            file_size,
            S_CLIP_BITRATE_BPS,
            S_CLIP_FPS,
            S_CLIP_DURATION_NS,
        );
        c.start_offset =
            (u128::from(S_CLIP_START_NS) * u128::from(S_CLIP_BITRATE_BPS) / 8 / u128::from(NS_PER_S)) as u64;
        c
    }

    /// Bytes per frame.
    pub fn frame_bytes(&self) -> u64 {
        (self.bitrate_bps / 8 / u64::from(self.fps.max(1))).max(1)
    }
}

/// The video player process.
#[derive(Debug, Clone)]
pub struct VideoPlayer {
    cfg: VideoConfig,
    frame_bytes: u64,
    started: bool,
    t0: Time,
    /// Next frame to read.
    next_read: u64,
    /// The read in flight: (tag, frame).
    in_flight: Option<(u64, u64)>,
    /// First frame not yet decided (shown or dropped).
    next_undecided: u64,
    /// Frames whose deadline has come (their buffer slot is free).
    slots: u64,
    /// Completion times of frames `next_undecided ..`, in order (reads complete in order).
    ready: VecDeque<Time>,
    dropped: u64,
    next_tag: u64,
    done: bool,
    report: ProcessReport,
}

impl VideoPlayer {
    /// A player with the given settings.
    pub fn new(mut cfg: VideoConfig) -> Self {
        cfg.fps = cfg.fps.max(1);
        cfg.buffer_frames = cfg.buffer_frames.max(1);
        let frame_bytes = cfg.frame_bytes();
        VideoPlayer {
            cfg,
            frame_bytes,
            started: false,
            t0: 0,
            next_read: 0,
            in_flight: None,
            next_undecided: 0,
            slots: 0,
            ready: VecDeque::new(),
            dropped: 0,
            next_tag: 1,
            done: false,
            report: ProcessReport {
                frames: Some((0, 0)),
                ..ProcessReport::default()
            },
        }
    }

    /// Display deadline of frame `i`, ns.
    pub fn deadline(&self, i: u64) -> Time {
        let slots = u128::from(self.cfg.buffer_frames) + u128::from(i);
        let off = slots * u128::from(NS_PER_S) / u128::from(self.cfg.fps);
        self.t0.saturating_add(u64::try_from(off).unwrap_or(u64::MAX))
    }

    fn frame_op(&self, i: u64) -> Op {
        let size = self.cfg.file_size.max(1);
        let pos = (u128::from(self.cfg.start_offset) + u128::from(i) * u128::from(self.frame_bytes)) % u128::from(size);
        let offset = pos as u64;
        let len = self.frame_bytes.min(size - offset);
        Op::Read {
            file: self.cfg.file,
            offset,
            len,
            mode: self.cfg.mode,
            meta: false,
        }
    }

    /// Advances the display clock to `now`: frames whose deadline has come free their buffer slot; each is shown if
    /// its data arrived by its deadline and dropped otherwise. A frame whose deadline is exactly `now` and whose data
    /// have not arrived stays undecided until later events at the same instant have been seen.
    fn decide(&mut self, now: Time) {
        while self.slots < self.cfg.frames && self.deadline(self.slots) <= now {
            self.slots += 1;
        }
        while self.next_undecided < self.slots {
            let d = self.deadline(self.next_undecided);
            match self.ready.front() {
                Some(&t) if t <= d => {}
                _ if d == now => break,
                _ => self.dropped += 1,
            }
            self.ready.pop_front();
            self.next_undecided += 1;
        }
        self.report.frames = Some((self.next_undecided, self.dropped));
    }
}

impl Process for VideoPlayer {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named(self.cfg.name.clone())
    }

    fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
        if self.done {
            return;
        }
        match event {
            Event::Start if !self.started => {
                self.started = true;
                self.t0 = now;
            }
            Event::Completed { tag, result } => {
                if let Some((t, frame)) = self.in_flight {
                    if t == tag {
                        self.in_flight = None;
                        let arrived = match result {
                            Ok(b) => {
                                self.report.read_bytes += b;
                                self.report.ops += 1;
                                now
                            }
                            Err(_) => {
                                self.report.errors += 1;
                                Time::MAX // a failed read never makes its frame ready
                            }
                        };
                        // A frame read after it was decided (dropped) is simply discarded.
                        if frame >= self.next_undecided {
                            self.ready.push_back(arrived);
                        }
                    }
                }
            }
            _ => {}
        }
        if !self.started {
            return;
        }
        self.decide(now);
        if self.next_undecided >= self.cfg.frames {
            self.done = true;
            out.exit = true;
            return;
        }
        if self.in_flight.is_none()
            && self.next_read < self.cfg.frames
            && self.next_read < self.slots + u64::from(self.cfg.buffer_frames)
        {
            let tag = self.next_tag;
            self.next_tag += 1;
            let frame = self.next_read;
            self.next_read += 1;
            self.in_flight = Some((tag, frame));
            out.issue(tag, self.frame_op(frame));
        }
        out.sleep_until = Some(if self.next_undecided < self.slots {
            // A frame due now whose data have not arrived: decide it just after this instant.
            now.saturating_add(1)
        } else {
            self.deadline(self.slots)
        });
    }

    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_exec::Exec;

    fn cfg() -> VideoConfig {
        // 25 fps, 4 Mbit/s: 20 000-byte frames, 40 ms apart; 2 s = 50 frames.
        VideoConfig::new("v", 2, 100_000_000, 4_000_000, 25, 2 * NS_PER_S)
    }

    #[test]
    fn the_seeds_clip_starts_at_1_32_and_plays_20_seconds() {
        // S's setting: 20 s of the trailer from 1:32, at an estimated 4 Mbit/s and 24 fps. 92 s at 500 000 bytes
        // a second puts the first frame 46 000 000 bytes into the file; 20 s at 24 fps are 480 frames of
        // 500 000 / 24 = 20 833 bytes.
        let c = VideoConfig::s_default(3, 200_000_000);
        assert_eq!(c.start_offset, 46_000_000);
        assert_eq!(c.frames, 480);
        assert_eq!(c.frame_bytes(), 20_833);
        assert_eq!((c.file, c.file_size), (3, 200_000_000));
    }

    #[test]
    fn fast_device_drops_nothing() {
        let mut v = VideoPlayer::new(cfg());
        let mut ex = Exec::new(1_000_000, 10); // 1 ms + 0.2 ms per frame
        let exit = ex.run(&mut v, 0, u64::MAX).expect("exits");
        assert_eq!(v.report().frames, Some((50, 0)));
        assert_eq!(ex.issued.len(), 50);
        assert_eq!(v.report().read_bytes, 50 * 20_000);
        // Sequential, frame-sized reads.
        for (i, is) in ex.issued.iter().enumerate() {
            assert!(matches!(is.op, Op::Read { offset, len: 20_000, .. } if offset == i as u64 * 20_000));
        }
        // Exits at the last deadline: (4 + 49) frames of 40 ms.
        assert_eq!(exit, 53 * 40_000_000);
        assert_eq!(ex.max_outstanding, 1);
    }

    #[test]
    fn slow_device_drops_frames() {
        let mut v = VideoPlayer::new(cfg());
        // 60 ms per frame read, frames due every 40 ms: falls behind after the buffer drains.
        let mut ex = Exec::new(60_000_000, 0);
        ex.run(&mut v, 0, u64::MAX).expect("exits");
        let (total, dropped) = v.report().frames.expect("frames");
        assert_eq!(total, 50);
        assert!(dropped > 10 && dropped < 50, "dropped {dropped}");
    }

    #[test]
    fn exactly_on_deadline_counts_as_shown_and_wraps() {
        let mut c = cfg();
        c.buffer_frames = 1;
        c.frames = 3;
        c.file_size = 50_000;
        let mut v = VideoPlayer::new(c);
        // Each read takes exactly one frame period: frame 0 is ready at 40 ms, its deadline.
        let mut ex = Exec::new(40_000_000, 0);
        ex.run(&mut v, 0, u64::MAX).expect("exits");
        assert_eq!(v.report().frames, Some((3, 0)));
        let offs: Vec<u64> = ex
            .issued
            .iter()
            .map(|i| if let Op::Read { offset, .. } = i.op { offset } else { 0 })
            .collect();
        assert_eq!(offs, vec![0, 20_000, 40_000]);
        assert!(matches!(ex.issued[2].op, Op::Read { len: 10_000, .. }));
    }
}
