"""Private: turning chunks into timed commands — rows to play, the playhead, pacing, the seam
between chunks, playback speed."""
