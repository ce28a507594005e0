"""Tokenization models run over pre-tokenized pieces."""
