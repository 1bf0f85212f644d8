"""The simulated DROID Franka's pieces every simulated robot uses: the arm model, the scene and
its camera renderer, the process helpers."""
