"""Placeholder."""
import streamlit as st

st.title("word_senses")
