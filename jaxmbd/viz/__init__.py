"""Pictures of models and runs: plots of a Solution, 3-D animations (HTML, MP4) and
their scenes. The top of the library: it may import anything below it."""
