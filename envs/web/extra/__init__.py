"""Twin tasks with larger pages, one module each: ``TASK`` (the MiniWoB++ name), ``MODEL``
(its :class:`envs.web.twin.TwinTask`) and ``EXPERT`` (its scripted teacher policy)."""
