"""Evaluation tasks with exact answers: generators, answer extractors, majority vote, accuracy statistics."""
