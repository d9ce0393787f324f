"""`up`, `down`, `plan`, `spot`: observe the world, plan purely (plan/), apply exactly the plan; the stack, the launch, the bootstrap stage."""
