"""Generating in rounds and turning rollouts into update rows: one round, serial rounds, fused rounds; the rows
kept between rounds and cut to the selection. No import of TRL's trainer: the trainer comes in as an interface."""
