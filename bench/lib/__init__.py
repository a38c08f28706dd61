"""What the bench scripts share (imported as `lib.NAME` by the scripts in bench/)."""
