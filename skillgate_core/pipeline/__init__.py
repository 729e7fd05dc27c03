"""The pipeline around the stages: the stage registry, recipes and their plans, running one stage.

- `stages`: every stage (input/output roles, config class, entrypoint), the top of the library.
- `stage_workdirs`: the temp folder of a stage run, with its owner process (dead ones removed).
- `recipe_plan`: which entries run and where each input comes from (earlier entry, explicit, on record).
- `recipes`: recipe files (TOML presets) resolved into a checked plan.
- `gathered`: several outputs of one role gathered into one content-keyed folder.
- `run`: running one stage (content-keyed output folder, reuse of a finished one).

Modules, highest first (pyproject's import-linter contract holds it): run | recipes, recipe_plan |
gathered, stages | stage_workdirs.
"""
