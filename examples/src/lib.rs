//! Runnable examples of ctrlkit: see the `[[example]]` targets.
