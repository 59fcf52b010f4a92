"""The player's half of Craftax's step (:func:`.game.front`) as Triton: one lane per world.

What: the floor change, crafting, DO (the mob in front attacked, else the block in front mined,
collected, drunk, eaten, opened or struck), placing (a torch lights the dark floors' light map),
shooting, spells, potions, books, enchanting, the necromancer's achievement and clock,
attributes and the player's move, in the torch code's order, on ``triton_lanes.BLOCK`` worlds a program.

Why: the torch half is a few hundred small launches a step (masks, gathers and scatters over
``[N, ...]`` tensors); here each lane reads and writes its world's fields where they live, in the
state's byte arena (:mod:`.state`), through the shared lane helpers of :mod:`.triton_lanes`
(field offsets, grid access with JAX's out-of-range semantics, the mob attack). :func:`front` is a
device function so the lead can fuse it with the tail's (:mod:`.triton_tail`) into one kernel;
:func:`run_front` launches it alone.

Exactness: every float is computed in the torch code's operation order, the launch disables the
compiler's multiply-add fusion (``enable_fp_fusion=False``), ints and floats convert as torch
converts them (truncation toward zero). One deliberate difference: a torch placed within four
cells of the map's far edges lights every cell of its 9 x 9 window that is on the map, as the JAX
reference's padded ``dynamic_update_slice`` does (the torch code's scatter over clamped indices
lets a clamped duplicate written later restore the old light at row / column 47 on the CPU).

How it is checked: ``tests/envs/test_craftax_full_triton_front.py`` runs this kernel in Triton's
interpreter on the CPU and compares the whole arena, byte for byte, with the torch half
(``g = _Step(s, t); front(g, a, d); g.write_back()``) over chained steps on states made to fire
every rule.
"""

from __future__ import annotations

from torch import Tensor

from noeira.envs.craftax_full import constants as C
from noeira.envs.craftax_full import game
from noeira.envs.craftax_full.state import State

try:  # optional: without Triton the torch half runs
    import triton
    import triton.language as tl
except ImportError:
    triton = None

__all__ = ["front", "run_front"]

if triton is not None:
    from noeira.envs.craftax_full.triton_lanes import (
        BOSS_LEVEL,
        CELLS,
        CRAFTING_TABLE,
        F_ACHIEVEMENTS,
        F_ARMOUR_ENCHANTMENTS,
        F_BOSS_PROGRESS,
        F_BOSS_TIMESTEPS_TO_SPAWN_THIS_ROUND,
        F_BOW_ENCHANTMENT,
        F_CHESTS_OPENED,
        F_DOWN_LADDERS,
        F_GROWING_PLANTS_AGE,
        F_GROWING_PLANTS_MASK,
        F_GROWING_PLANTS_POSITIONS,
        F_INVENTORY_ARMOUR,
        F_INVENTORY_ARROWS,
        F_INVENTORY_BOOKS,
        F_INVENTORY_BOW,
        F_INVENTORY_COAL,
        F_INVENTORY_DIAMOND,
        F_INVENTORY_IRON,
        F_INVENTORY_PICKAXE,
        F_INVENTORY_POTIONS,
        F_INVENTORY_RUBY,
        F_INVENTORY_SAPLING,
        F_INVENTORY_SAPPHIRE,
        F_INVENTORY_STONE,
        F_INVENTORY_SWORD,
        F_INVENTORY_TORCHES,
        F_INVENTORY_WOOD,
        F_ITEM_MAP,
        F_LEARNED_SPELLS,
        F_LIGHT_MAP,
        F_MAP,
        F_MELEE_MOBS_MASK,
        F_MONSTERS_KILLED,
        F_PLAYER_DEXTERITY,
        F_PLAYER_DIRECTION,
        F_PLAYER_DRINK,
        F_PLAYER_ENERGY,
        F_PLAYER_FOOD,
        F_PLAYER_HEALTH,
        F_PLAYER_HUNGER,
        F_PLAYER_INTELLIGENCE,
        F_PLAYER_LEVEL,
        F_PLAYER_MANA,
        F_PLAYER_POSITION,
        F_PLAYER_PROJECTILE_DIRECTIONS,
        F_PLAYER_PROJECTILES_MASK,
        F_PLAYER_PROJECTILES_POSITION,
        F_PLAYER_PROJECTILES_TYPE_ID,
        F_PLAYER_STRENGTH,
        F_PLAYER_THIRST,
        F_PLAYER_XP,
        F_POTION_MAPPING,
        F_RANGED_MOBS_MASK,
        F_SWORD_ENCHANTMENT,
        F_UP_LADDERS,
        FIFTH,
        FIRE_GRASS,
        FURNACE,
        GRASS,
        ICE_GRASS,
        PATH,
        RIPE_PLANT,
        WATER,
        W,
        action_step,
        attack,
        bit,
        cell,
        constant,
        first,
        flag,
        in_bounds,
        in_mob,
        lanes,
        launch,
        ld8,
        ld32,
        ldf,
        max_food,
        pack,
        pick,
        player_damage,
        set_ach,
        solid,
        spawn_projectile,
        st8,
        st32,
        stf,
        uniform,
        unpack,
        valid_move,
    )

    _k = constant  # tl.constexpr when compiled, a plain number in the interpreter

    # actions
    DO, DESCEND, ASCEND = _k(C.DO), _k(C.ACT["descend"]), _k(C.ACT["ascend"])
    MAKE_WOOD_PICKAXE, MAKE_STONE_PICKAXE = _k(C.ACT["make_wood_pickaxe"]), _k(C.ACT["make_stone_pickaxe"])
    MAKE_IRON_PICKAXE, MAKE_DIAMOND_PICKAXE = _k(C.ACT["make_iron_pickaxe"]), _k(C.ACT["make_diamond_pickaxe"])
    MAKE_WOOD_SWORD, MAKE_STONE_SWORD = _k(C.ACT["make_wood_sword"]), _k(C.ACT["make_stone_sword"])
    MAKE_IRON_SWORD, MAKE_DIAMOND_SWORD = _k(C.ACT["make_iron_sword"]), _k(C.ACT["make_diamond_sword"])
    MAKE_IRON_ARMOUR, MAKE_DIAMOND_ARMOUR = _k(C.ACT["make_iron_armour"]), _k(C.ACT["make_diamond_armour"])
    MAKE_ARROW, MAKE_TORCH = _k(C.ACT["make_arrow"]), _k(C.ACT["make_torch"])
    PLACE_STONE, PLACE_TABLE = _k(C.ACT["place_stone"]), _k(C.ACT["place_table"])
    PLACE_FURNACE, PLACE_PLANT = _k(C.ACT["place_furnace"]), _k(C.ACT["place_plant"])
    PLACE_TORCH, SHOOT_ARROW = _k(C.ACT["place_torch"]), _k(C.ACT["shoot_arrow"])
    CAST_FIREBALL, CAST_ICEBALL = _k(C.ACT["cast_fireball"]), _k(C.ACT["cast_iceball"])
    DRINK_FIRST, DRINK_LAST = _k(C.ACT["drink_potion_red"]), _k(C.ACT["drink_potion_yellow"])
    READ_BOOK = _k(C.ACT["read_book"])
    ENCHANT_SWORD, ENCHANT_ARMOUR = _k(C.ACT["enchant_sword"]), _k(C.ACT["enchant_armour"])
    ENCHANT_BOW = _k(C.ACT["enchant_bow"])
    LEVEL_UP_DEX, LEVEL_UP_STR, LEVEL_UP_INT = (_k(C.ACT[f"level_up_{k}"])
                                                for k in ("dexterity", "strength", "intelligence"))
    LEFT, DOWN = _k(C.LEFT), _k(C.DOWN)
    # blocks and items (the rest come with the lanes)
    STONE, TREE, SAND, PLANT = _k(C.STONE), _k(C.TREE), _k(C.SAND), _k(C.PLANT)
    COAL, IRON, DIAMOND, SAPPHIRE, RUBY = _k(C.COAL), _k(C.IRON), _k(C.DIAMOND), _k(C.SAPPHIRE), _k(C.RUBY)
    STALAGMITE, CHEST, FOUNTAIN = _k(C.STALAGMITE), _k(C.CHEST), _k(C.FOUNTAIN)
    FIRE_TREE, ICE_SHRUB = _k(C.FIRE_TREE), _k(C.ICE_SHRUB)
    FIRE_TABLE, ICE_TABLE = _k(C.ENCHANTMENT_TABLE_FIRE), _k(C.ENCHANTMENT_TABLE_ICE)
    NECROMANCER = _k(C.NECROMANCER)
    ITEM_NONE, ITEM_TORCH = _k(C.ITEM_NONE), _k(C.ITEM_TORCH)
    LADDER_DOWN, LADDER_UP = _k(C.ITEM_LADDER_DOWN), _k(C.ITEM_LADDER_UP)
    # achievements
    A_MAKE_IRON_ARMOUR, A_MAKE_DIAMOND_ARMOUR = _k(C.A["make_iron_armour"]), _k(C.A["make_diamond_armour"])
    A_COLLECT_DRINK, A_EAT_PLANT, A_OPEN_CHEST = _k(C.A["collect_drink"]), _k(C.A["eat_plant"]), _k(C.A["open_chest"])
    A_DAMAGE_NECROMANCER, A_DEFEAT_NECROMANCER = _k(C.A["damage_necromancer"]), _k(C.A["defeat_necromancer"])
    A_PLACE_TABLE, A_PLACE_FURNACE = _k(C.A["place_table"]), _k(C.A["place_furnace"])
    A_PLACE_STONE, A_PLACE_TORCH, A_PLACE_PLANT = _k(C.A["place_stone"]), _k(C.A["place_torch"]), _k(C.A["place_plant"])
    A_FIRE_BOW, A_CAST_FIREBALL, A_CAST_ICEBALL = _k(C.A["fire_bow"]), _k(C.A["cast_fireball"]), _k(C.A["cast_iceball"])
    A_DRINK_POTION = _k(C.A["drink_potion"])
    A_LEARN_FIREBALL, A_LEARN_ICEBALL = _k(C.A["learn_fireball"]), _k(C.A["learn_iceball"])
    A_ENCHANT_SWORD, A_ENCHANT_ARMOUR = _k(C.A["enchant_sword"]), _k(C.A["enchant_armour"])
    LEVEL_ACHIEVEMENT = pack(list(C.LEVEL_ACHIEVEMENTS), 7)
    """The achievement for entering each floor (7 bits a floor)."""
    # floors, projectiles, attributes
    LEVELS = _k(C.NUM_LEVELS)
    CLEAR_KILLS, BOSS_SPAWN_TURNS = _k(C.MONSTERS_KILLED_TO_CLEAR_LEVEL), _k(C.BOSS_FIGHT_SPAWN_TURNS)
    DARK_INDEX = pack([C.DARK_LEVELS.index(lv) + 1 if lv in C.DARK_LEVELS else 0 for lv in range(C.NUM_LEVELS)], 3)
    """Each floor's light map among the dark floors' plus one (0: a bright floor, no light map; 3 bits a floor)."""
    ARROW2, FIREBALL, ICEBALL = _k(C.ARROW2), _k(C.FIREBALL), _k(C.ICEBALL)
    MAX_ATTRIBUTE = _k(C.MAX_ATTRIBUTE)
    # the variates (columns of a row of ``u``) and the chest's loot probabilities (float32 values)
    U_SAPLING, U_SPELL, U_ARMOUR = _k(game.U_SAPLING), _k(game.U_SPELL), _k(game.U_ARMOUR)
    U_CHEST_TORCH, U_CHEST_TORCH_N = _k(game.U_CHEST_TORCH), _k(game.U_CHEST_TORCH_N)
    U_CHEST_ORE, U_CHEST_ORE_ID, U_CHEST_ORE_N = (_k(game.U_CHEST_ORE), _k(game.U_CHEST_ORE_ID),
                                                  _k(game.U_CHEST_ORE_N))
    U_CHEST_POTION, U_CHEST_POTION_ID = _k(game.U_CHEST_POTION), _k(game.U_CHEST_POTION_ID)
    U_CHEST_POTION_N, U_CHEST_ARROWS = _k(game.U_CHEST_POTION_N), _k(game.U_CHEST_ARROWS)
    U_CHEST_ARROWS_N, U_CHEST_TOOL = _k(game.U_CHEST_ARROWS_N), _k(game.U_CHEST_TOOL)
    U_CHEST_TOOL_ID, U_CHEST_PICKAXE = _k(game.U_CHEST_TOOL_ID), _k(game.U_CHEST_PICKAXE)
    U_CHEST_SWORD = _k(game.U_CHEST_SWORD)
    ORE_CDF0, ORE_CDF1, ORE_CDF2, ORE_CDF3 = (_k(C.f32(v)) for v in game.ORE_CDF)
    TOOL_CDF0, TOOL_CDF1, TOOL_CDF2 = (_k(C.f32(v)) for v in game.TOOL_CDF)
    # game._chest_loot's and game._do's chances: torches, ore, a potion, arrows, a tool; a sapling in grass
    P_TORCHES, P_ORE, P_POTION, P_ARROWS, P_TOOL, P_SAPLING = (_k(C.f32(v)) for v in (0.6, 0.6, 0.5, 0.25, 0.2, 0.1))

    # -- small lane helpers of the front -----------------------------------------------------------
    @triton.jit
    def _add(a32, r32, at, gain, where):
        """Int32 element ``at`` += ``gain`` where ``where``."""
        st32(a32, r32, at, ld32(a32, r32, at, where) + gain, where)

    @triton.jit
    def _tier(u, T1, T2, T3):  # noqa: N803
        """1 + the number of the thresholds (a cumulative distribution) ``u`` reaches."""
        return 1 + (u >= T1).to(tl.int32) + (u >= T2).to(tl.int32) + (u >= T3).to(tl.int32)

    # -- the rules, in game.front's order ----------------------------------------------------------
    @triton.jit
    def _change_floor(a8, a32, r8, r32, live, act):
        """Down a ladder (the floor cleared of monsters) or up one, onto the next floor's matching
        ladder; a floor entered the first time gives its achievement and an experience point.
        Returns the player's floor and position."""
        lvl = ld32(a32, r32, F_PLAYER_LEVEL, live)
        px = ld32(a32, r32, F_PLAYER_POSITION, live)
        py = ld32(a32, r32, F_PLAYER_POSITION + 1, live)
        idx, _ok = cell(lvl, px, py)
        item = ld8(a8, r8, F_ITEM_MAP + idx, live)
        killed = ld32(a32, r32, F_MONSTERS_KILLED + lvl, live)
        down = (act == DESCEND) & (item == LADDER_DOWN) & (killed >= CLEAR_KILLS) & (lvl < LEVELS - 1)
        up = (act == ASCEND) & (item == LADDER_UP) & (lvl > 0)
        below = tl.minimum(lvl + 1, LEVELS - 1)
        above = tl.where(lvl > 0, lvl - 1, LEVELS - 1)  # (lvl - 1) % levels
        px = tl.where(down, ld32(a32, r32, F_UP_LADDERS + 2 * below, live),
                      tl.where(up, ld32(a32, r32, F_DOWN_LADDERS + 2 * above, live), px))
        py = tl.where(down, ld32(a32, r32, F_UP_LADDERS + 2 * below + 1, live),
                      tl.where(up, ld32(a32, r32, F_DOWN_LADDERS + 2 * above + 1, live), py))
        st32(a32, r32, F_PLAYER_POSITION, px, live)
        st32(a32, r32, F_PLAYER_POSITION + 1, py, live)
        new = lvl + down.to(tl.int32) - up.to(tl.int32)
        which = unpack(LEVEL_ACHIEVEMENT, new, 7)
        first_time = (new != 0) & ~flag(a8, r8, F_ACHIEVEMENTS + which, live)
        set_ach(a8, r8, which, new != 0, live)
        st32(a32, r32, F_PLAYER_LEVEL, new, live)
        _add(a32, r32, F_PLAYER_XP, first_time.to(tl.int32), live)
        return new, px, py

    @triton.jit
    def _near(a8, r8, lvl, px, py, live):
        """Whether a crafting table, and a furnace, is on one of the 8 cells around the player (on the map)."""
        k = tl.arange(0, 16)[None, :]  # the 3 x 3 square, row-major, less its centre (4) and the padding
        x = px[:, None] + k // 3 - 1
        y = py[:, None] + k % 3 - 1
        around = live[:, None] & (k < 9) & (k != 4) & in_bounds(x, y)
        b = tl.load(a8 + r8[:, None] + F_MAP + lvl[:, None] * CELLS + x * W + y, mask=around, other=0)
        table = tl.max((around & (b == CRAFTING_TABLE)).to(tl.int32), axis=1) > 0
        furnace = tl.max((around & (b == FURNACE)).to(tl.int32), axis=1) > 0
        return table, furnace

    @triton.jit
    def _craft(a8, a32, r8, r32, live, act, lvl, px, py):
        """Tools, armour, arrows and torches. Each recipe is an action, a station (a table near;
        and a furnace for iron) and costs (wood, stone, iron, coal, diamond): at most one recipe
        a step, so the recipe of the lane's action is made if its station is near and its costs
        are met."""
        pick_ = (act == MAKE_WOOD_PICKAXE) | (act == MAKE_STONE_PICKAXE) | (act == MAKE_IRON_PICKAXE) | (
            act == MAKE_DIAMOND_PICKAXE)
        sword = (act == MAKE_WOOD_SWORD) | (act == MAKE_STONE_SWORD) | (act == MAKE_IRON_SWORD) | (
            act == MAKE_DIAMOND_SWORD)
        level = tl.where((act == MAKE_WOOD_PICKAXE) | (act == MAKE_WOOD_SWORD), 1, tl.where(
            (act == MAKE_STONE_PICKAXE) | (act == MAKE_STONE_SWORD), 2, tl.where(
                (act == MAKE_IRON_PICKAXE) | (act == MAKE_IRON_SWORD), 3, 4)))
        stone_tool = (act == MAKE_STONE_PICKAXE) | (act == MAKE_STONE_SWORD)
        iron_tool = (act == MAKE_IRON_PICKAXE) | (act == MAKE_IRON_SWORD)
        iron_armour = act == MAKE_IRON_ARMOUR
        diamond_armour = act == MAKE_DIAMOND_ARMOUR
        arrow = act == MAKE_ARROW
        torch_ = act == MAKE_TORCH
        table, furnace = _near(a8, r8, lvl, px, py, live & (pick_ | sword | iron_armour | diamond_armour | arrow | torch_))
        c_wood = (pick_ | sword | arrow | torch_).to(tl.int32)
        c_stone = (stone_tool | iron_tool | arrow).to(tl.int32)
        c_iron = iron_tool.to(tl.int32) + 3 * iron_armour.to(tl.int32)
        c_coal = iron_tool.to(tl.int32) + 3 * iron_armour.to(tl.int32) + torch_.to(tl.int32)
        c_diamond = (3 * ((act == MAKE_DIAMOND_PICKAXE) | diamond_armour).to(tl.int32)
                     + 2 * (act == MAKE_DIAMOND_SWORD).to(tl.int32))
        wood = ld32(a32, r32, F_INVENTORY_WOOD, live)
        stone = ld32(a32, r32, F_INVENTORY_STONE, live)
        iron = ld32(a32, r32, F_INVENTORY_IRON, live)
        coal = ld32(a32, r32, F_INVENTORY_COAL, live)
        diamond = ld32(a32, r32, F_INVENTORY_DIAMOND, live)
        arrows = ld32(a32, r32, F_INVENTORY_ARROWS, live)
        torches = ld32(a32, r32, F_INVENTORY_TORCHES, live)
        affords = (((c_wood == 0) | (wood >= c_wood)) & ((c_stone == 0) | (stone >= c_stone))  # a cost of 0 asks nothing
                   & ((c_iron == 0) | (iron >= c_iron)) & ((c_coal == 0) | (coal >= c_coal))
                   & ((c_diamond == 0) | (diamond >= c_diamond)))
        station = table & (furnace | ~(iron_tool | iron_armour))
        piece = tl.where(iron_armour, 1, 2)  # the armour level made
        below = tl.zeros_like(act)
        for i in tl.static_range(4):
            below |= bit(ld32(a32, r32, F_INVENTORY_ARMOUR + i, live) < piece, i)
        made_tool = ((pick_ & (ld32(a32, r32, F_INVENTORY_PICKAXE, live) < level))
                     | (sword & (ld32(a32, r32, F_INVENTORY_SWORD, live) < level)))
        made_armour = (iron_armour | diamond_armour) & (below != 0)
        made_stack = (arrow & (arrows < 99)) | (torch_ & (torches < 99))
        made = live & station & affords & (made_tool | made_armour | made_stack)
        st32(a32, r32, F_INVENTORY_WOOD, wood - c_wood, made)
        st32(a32, r32, F_INVENTORY_STONE, stone - c_stone, made)
        st32(a32, r32, F_INVENTORY_IRON, iron - c_iron, made)
        st32(a32, r32, F_INVENTORY_COAL, coal - c_coal, made)
        st32(a32, r32, F_INVENTORY_DIAMOND, diamond - c_diamond, made)
        st32(a32, r32, F_INVENTORY_PICKAXE, level, made & pick_)
        st32(a32, r32, F_INVENTORY_SWORD, level, made & sword)
        st32(a32, r32, F_INVENTORY_ARMOUR + first(below, 4), piece, made & made_armour)
        st32(a32, r32, F_INVENTORY_ARROWS, arrows + 2, made & arrow)
        st32(a32, r32, F_INVENTORY_TORCHES, torches + 4, made & torch_)
        set_ach(a8, r8, A_MAKE_IRON_ARMOUR, made & iron_armour, live)
        set_ach(a8, r8, A_MAKE_DIAMOND_ARMOUR, made & diamond_armour, live)

    @triton.jit
    def _do(a8, a32, af, r8, r32, e64, live, act, u_p, lvl, px, py, dx, dy):
        """DO: attack the mob in front, else act on the block in front (mine it if the pickaxe is
        good enough, cut a tree, find a sapling in grass, drink, eat a ripe plant, open a chest and
        take its loot, strike the necromancer when he is vulnerable)."""
        do = live & (act == DO)
        bx = px + dx
        by = py + dy
        phys, fire, ice = player_damage(a32, r32, do)  # (the lanes not doing read and write nothing for it)
        attacked, _killed = attack(a8, a32, af, r8, r32, lvl, bx, by, phys, fire, ice, True, do, do)

        bidx, bok = cell(lvl, bx, by)
        block = ld8(a8, r8, F_MAP + bidx, live)
        ok = do & in_bounds(bx, by) & ~attacked
        pickaxe = ld32(a32, r32, F_INVENTORY_PICKAXE, live)
        tree = (block == TREE) | (block == FIRE_TREE) | (block == ICE_SHRUB)
        stone = (block == STONE) & (pickaxe >= 1)
        coal = (block == COAL) & (pickaxe >= 1)
        iron = (block == IRON) & (pickaxe >= 2)
        diamond = (block == DIAMOND) & (pickaxe >= 3)
        sapphire = (block == SAPPHIRE) & (pickaxe >= 4)
        ruby = (block == RUBY) & (pickaxe >= 4)
        stalagmite = (block == STALAGMITE) & (pickaxe >= 1)
        chest = block == CHEST
        ripe = block == RIPE_PLANT
        to_path = (stone | coal | iron | diamond | sapphire | ruby | stalagmite | chest | (block == FURNACE)
                   | (block == CRAFTING_TABLE))
        new_block = tl.where(block == TREE, GRASS, tl.where(block == FIRE_TREE, FIRE_GRASS, tl.where(
            block == ICE_SHRUB, ICE_GRASS, tl.where(to_path, PATH, tl.where(ripe, PLANT, block)))))
        st8(a8, r8, F_MAP + bidx, new_block, bok & ok)

        # what the block gives, and a chest's loot (add_items_from_chest; its variates read where a chest opens)
        opening = ok & chest
        op = opening.to(tl.int32)
        n_torches = (4 + (uniform(u_p, e64, U_CHEST_TORCH_N, opening) * 4).to(tl.int32)) * (
            uniform(u_p, e64, U_CHEST_TORCH, opening) < P_TORCHES).to(tl.int32)
        u_ore = uniform(u_p, e64, U_CHEST_ORE_ID, opening)
        ore = ((u_ore >= ORE_CDF0).to(tl.int32) + (u_ore >= ORE_CDF1).to(tl.int32) + (u_ore >= ORE_CDF2).to(tl.int32)
               + (u_ore >= ORE_CDF3).to(tl.int32))  # coal, iron, diamond, sapphire, ruby
        u_ore_n = uniform(u_p, e64, U_CHEST_ORE_N, opening)
        n_ore = tl.where(ore == 0, 1 + (u_ore_n * 3).to(tl.int32), tl.where(ore == 1, 1 + (u_ore_n * 2).to(tl.int32), 1))
        n_ore = n_ore * (uniform(u_p, e64, U_CHEST_ORE, opening) < P_ORE).to(tl.int32) * op
        potion = tl.minimum((uniform(u_p, e64, U_CHEST_POTION_ID, opening) * 6).to(tl.int32), 5)
        n_potion = (1 + (uniform(u_p, e64, U_CHEST_POTION_N, opening) * 2).to(tl.int32)) * (
            uniform(u_p, e64, U_CHEST_POTION, opening) < P_POTION).to(tl.int32)
        n_arrows = (1 + (uniform(u_p, e64, U_CHEST_ARROWS_N, opening) * 4).to(tl.int32)) * (
            uniform(u_p, e64, U_CHEST_ARROWS, opening) < P_ARROWS).to(tl.int32)
        tool = opening & (uniform(u_p, e64, U_CHEST_TOOL, opening) < P_TOOL)
        tool_id = (uniform(u_p, e64, U_CHEST_TOOL_ID, opening) * 2).to(tl.int32)
        opened = flag(a8, r8, F_CHESTS_OPENED + lvl, live)
        sapling = (block == GRASS) & (uniform(u_p, e64, U_SAPLING, ok) < P_SAPLING)
        _add(a32, r32, F_INVENTORY_WOOD, tree.to(tl.int32), ok)
        _add(a32, r32, F_INVENTORY_STONE, (stone | stalagmite).to(tl.int32), ok)
        _add(a32, r32, F_INVENTORY_SAPLING, sapling.to(tl.int32), ok)
        _add(a32, r32, F_INVENTORY_COAL, coal.to(tl.int32) + n_ore * (ore == 0).to(tl.int32), ok)
        _add(a32, r32, F_INVENTORY_IRON, iron.to(tl.int32) + n_ore * (ore == 1).to(tl.int32), ok)
        _add(a32, r32, F_INVENTORY_DIAMOND, diamond.to(tl.int32) + n_ore * (ore == 2).to(tl.int32), ok)
        _add(a32, r32, F_INVENTORY_SAPPHIRE, sapphire.to(tl.int32) + n_ore * (ore == 3).to(tl.int32), ok)
        _add(a32, r32, F_INVENTORY_RUBY, ruby.to(tl.int32) + n_ore * (ore == 4).to(tl.int32), ok)
        _add(a32, r32, F_INVENTORY_TORCHES, n_torches * op, opening)
        _add(a32, r32, F_INVENTORY_ARROWS, n_arrows * op, opening)
        _add(a32, r32, F_INVENTORY_BOOKS, 1, opening & ~opened & ((lvl == 3) | (lvl == 4)))
        _add(a32, r32, F_INVENTORY_POTIONS + potion, n_potion, opening)
        st32(a32, r32, F_INVENTORY_BOW, tl.zeros_like(lvl) + 1, opening & (lvl == 1) & ~opened)
        level = _tier(uniform(u_p, e64, U_CHEST_PICKAXE, opening), TOOL_CDF0, TOOL_CDF1, TOOL_CDF2)
        st32(a32, r32, F_INVENTORY_PICKAXE, tl.maximum(level, pickaxe), tool & (tool_id == 0))
        level = _tier(uniform(u_p, e64, U_CHEST_SWORD, opening), TOOL_CDF0, TOOL_CDF1, TOOL_CDF2)
        swd = ld32(a32, r32, F_INVENTORY_SWORD, live)
        st32(a32, r32, F_INVENTORY_SWORD, tl.maximum(level, swd), tool & (tool_id == 1))

        # drinking and eating
        top = max_food(a32, r32, live)  # also the most drink
        water = ok & ((block == WATER) | (block == FOUNTAIN))
        st32(a32, r32, F_PLAYER_DRINK, tl.minimum(top, ld32(a32, r32, F_PLAYER_DRINK, live) + 1), water)
        stf(af, r32, F_PLAYER_THIRST, tl.zeros_like(phys), water)
        eat = ok & ripe
        st32(a32, r32, F_PLAYER_FOOD, tl.minimum(top, ld32(a32, r32, F_PLAYER_FOOD, live) + 4), eat)
        stf(af, r32, F_PLAYER_HUNGER, tl.zeros_like(phys), eat)
        here = tl.zeros_like(bx)  # the growing plants at the cell eaten
        for i in tl.static_range(10):
            at = F_GROWING_PLANTS_POSITIONS + 2 * i
            here |= bit((ld32(a32, r32, at, eat) == bx) & (ld32(a32, r32, at + 1, eat) == by), i)
        st32(a32, r32, F_GROWING_PLANTS_AGE + first(here, 10), tl.zeros_like(bx), eat)

        # a chest counts as opened, and the necromancer as struck, even when the cell is off the map
        st8(a8, r8, F_CHESTS_OPENED + lvl, chest, do & chest)
        bt = ld32(a32, r32, F_BOSS_TIMESTEPS_TO_SPAWN_THIS_ROUND, live)
        guarded = (flag(a8, r8, F_MELEE_MOBS_MASK + 3 * lvl, live) | flag(a8, r8, F_MELEE_MOBS_MASK + 3 * lvl + 1, live)
                   | flag(a8, r8, F_MELEE_MOBS_MASK + 3 * lvl + 2, live)
                   | flag(a8, r8, F_RANGED_MOBS_MASK + 2 * lvl, live) | flag(a8, r8, F_RANGED_MOBS_MASK + 2 * lvl + 1, live))
        damaging = (block == NECROMANCER) & ~guarded & (bt <= 0) & (lvl == BOSS_LEVEL)
        strike = do & damaging
        _add(a32, r32, F_BOSS_PROGRESS, 1, strike)
        st32(a32, r32, F_BOSS_TIMESTEPS_TO_SPAWN_THIS_ROUND, tl.zeros_like(bt) + BOSS_SPAWN_TURNS, strike)
        set_ach(a8, r8, A_COLLECT_DRINK, water, live)
        set_ach(a8, r8, A_EAT_PLANT, eat, live)
        set_ach(a8, r8, A_OPEN_CHEST, opening, live)
        set_ach(a8, r8, A_DAMAGE_NECROMANCER, ok & damaging, live)

    @triton.jit
    def _place(a8, a32, af, r8, r32, live, act, lvl, px, py, dx, dy):
        """Place a table, a furnace, stone (also into water), a torch (an item; on a dark floor its
        light is added to the floor's light map, clipped to 1) or a sapling (a growing plant) in front."""
        bx = px + dx
        by = py + dy
        bidx, bok = cell(lvl, bx, by)
        block = ld8(a8, r8, F_MAP + bidx, live)
        item = ld8(a8, r8, F_ITEM_MAP + bidx, live)
        taken = solid(block) | (item != ITEM_NONE)
        ok = live & in_bounds(bx, by) & ~in_mob(a8, r8, bidx, bx, by, px, py, live)
        wood = ld32(a32, r32, F_INVENTORY_WOOD, live)
        stone = ld32(a32, r32, F_INVENTORY_STONE, live)
        torches = ld32(a32, r32, F_INVENTORY_TORCHES, live)
        sapling = ld32(a32, r32, F_INVENTORY_SAPLING, live)
        table = ok & (act == PLACE_TABLE) & ~taken & (wood >= 2)
        furnace = ok & (act == PLACE_FURNACE) & ~taken & (stone > 0)
        place_stone = ok & (act == PLACE_STONE) & ((block == WATER) | ~taken) & (stone > 0)
        holds_item = (block == GRASS) | (block == SAND) | (block == PATH) | (block == FIRE_GRASS) | (block == ICE_GRASS)
        torch_ = ok & (act == PLACE_TORCH) & holds_item & (item == ITEM_NONE) & (torches > 0)
        plant = ok & (act == PLACE_PLANT) & (block == GRASS) & (sapling > 0) & (item == ITEM_NONE)
        new_block = tl.where(table, CRAFTING_TABLE, tl.where(furnace, FURNACE, tl.where(place_stone, STONE, PLANT)))
        st8(a8, r8, F_MAP + bidx, new_block, bok & (table | furnace | place_stone | plant))
        st8(a8, r8, F_ITEM_MAP + bidx, tl.zeros_like(bx) + ITEM_TORCH, bok & torch_)
        st32(a32, r32, F_INVENTORY_WOOD, wood - 2, table)
        st32(a32, r32, F_INVENTORY_STONE, stone - 1, furnace | place_stone)
        st32(a32, r32, F_INVENTORY_TORCHES, torches - 1, torch_)
        st32(a32, r32, F_INVENTORY_SAPLING, sapling - 1, plant)
        set_ach(a8, r8, A_PLACE_TABLE, table, live)
        set_ach(a8, r8, A_PLACE_FURNACE, furnace, live)
        set_ach(a8, r8, A_PLACE_STONE, place_stone, live)
        set_ach(a8, r8, A_PLACE_TORCH, torch_, live)
        set_ach(a8, r8, A_PLACE_PLANT, plant, live)
        # the torch's light on a dark floor: the cells of its 9 x 9 window on the map, a row at a time
        # (a [lanes, 16] tile; the programs where no lane lights skip it)
        dark = unpack(DARK_INDEX, lvl, 3) - 1
        lighting = torch_ & (dark >= 0)
        if tl.max(lighting.to(tl.int32), axis=0) > 0:
            j = tl.arange(0, 16)[None, :]
            oy = j - 4
            y = by[:, None] + oy
            for ox in range(-4, 5):
                x = bx[:, None] + ox
                lit = lighting[:, None] & (j < 9) & in_bounds(x, y)
                at = af + r32[:, None] + F_LIGHT_MAP + dark[:, None] * CELLS + x * W + y
                # constants.torch_light_map: clip(1 - d * 0.2, 0, 1), d the correctly rounded sqrt (torch's)
                light = 1.0 - tl.sqrt_rn((ox * ox + oy * oy).to(tl.float32)) * FIFTH
                light = tl.minimum(tl.maximum(light, 0.0), 1.0)
                cur = tl.load(at, mask=lit, other=0.0)
                tl.store(at, tl.minimum(tl.maximum(light + cur, 0.0), 1.0), mask=lit)
        # a new growing plant in the first free slot (none when all ten are taken)
        free = tl.zeros_like(bx)
        for i in tl.static_range(10):
            free |= bit(~flag(a8, r8, F_GROWING_PLANTS_MASK + i, plant), i)
        slot = first(free, 10)
        adding = plant & (free != 0)
        st32(a32, r32, F_GROWING_PLANTS_POSITIONS + 2 * slot, bx, adding)
        st32(a32, r32, F_GROWING_PLANTS_POSITIONS + 2 * slot + 1, by, adding)
        st32(a32, r32, F_GROWING_PLANTS_AGE + slot, tl.zeros_like(bx), adding)
        st8(a8, r8, F_GROWING_PLANTS_MASK + slot, adding, adding)

    @triton.jit
    def _projectiles(a8, a32, r8, r32, live, act, lvl, px, py, dx, dy):
        """``_shoot`` and ``_cast``: an arrow (a bow and an arrow), a fireball or an iceball (the spell
        learned, 2 mana) flies from the player the way they face, if one of the floor's three player
        projectile slots is free. One action a step: at most one of them."""
        alive = tl.zeros_like(px)
        for i in tl.static_range(3):
            alive += flag(a8, r8, F_PLAYER_PROJECTILES_MASK + 3 * lvl + i, live).to(tl.int32)
        free = alive < 3
        arrows = ld32(a32, r32, F_INVENTORY_ARROWS, live)
        shoot = live & (act == SHOOT_ARROW) & (ld32(a32, r32, F_INVENTORY_BOW, live) >= 1) & (arrows >= 1) & free
        mana = ld32(a32, r32, F_PLAYER_MANA, live)
        ready = live & (mana >= 2) & free
        fire = ready & (act == CAST_FIREBALL) & flag(a8, r8, F_LEARNED_SPELLS, live)
        ice = ready & (act == CAST_ICEBALL) & flag(a8, r8, F_LEARNED_SPELLS + 1, live)
        ptype = tl.where(shoot, ARROW2, tl.where(fire, FIREBALL, ICEBALL))
        spawn_projectile(a8, a32, r8, r32, lvl, F_PLAYER_PROJECTILES_POSITION, F_PLAYER_PROJECTILES_MASK,
                         F_PLAYER_PROJECTILE_DIRECTIONS, F_PLAYER_PROJECTILES_TYPE_ID, shoot | fire | ice, px, py,
                         dx, dy, ptype, live)
        st32(a32, r32, F_INVENTORY_ARROWS, arrows - 1, shoot)
        st32(a32, r32, F_PLAYER_MANA, mana - 2, fire | ice)
        set_ach(a8, r8, A_FIRE_BOW, shoot, live)
        set_ach(a8, r8, A_CAST_FIREBALL, fire, live)
        set_ach(a8, r8, A_CAST_ICEBALL, ice, live)

    @triton.jit
    def _drink_potion(a8, a32, af, r8, r32, live, act):
        """A potion of the colour drunk has the effect the world maps it to: +8 or -3 health, mana or energy."""
        which = tl.minimum(tl.maximum(act - DRINK_FIRST, 0), 5)
        count = ld32(a32, r32, F_INVENTORY_POTIONS + which, live)
        drinking = live & (act >= DRINK_FIRST) & (act <= DRINK_LAST) & (count > 0)
        effect = ld32(a32, r32, F_POTION_MAPPING + which, live)
        health = ldf(af, r32, F_PLAYER_HEALTH, live)  # (every lane adds, as torch's add_ does: -0.0 + 0.0 is 0.0)
        stf(af, r32, F_PLAYER_HEALTH, health + ((drinking & (effect == 0)).to(tl.float32) * 8.0
                                                 - (drinking & (effect == 1)).to(tl.float32) * 3.0), live)
        _add(a32, r32, F_PLAYER_MANA, (drinking & (effect == 2)).to(tl.int32) * 8
             - (drinking & (effect == 3)).to(tl.int32) * 3, drinking)
        _add(a32, r32, F_PLAYER_ENERGY, (drinking & (effect == 4)).to(tl.int32) * 8
             - (drinking & (effect == 5)).to(tl.int32) * 3, drinking)
        st32(a32, r32, F_INVENTORY_POTIONS + which, count - 1, drinking)
        set_ach(a8, r8, A_DRINK_POTION, drinking, live)

    @triton.jit
    def _read_book(a8, a32, r8, r32, e64, live, act, u_p):
        """A book teaches a spell not yet learned, at random (the fireball when both are known)."""
        books = ld32(a32, r32, F_INVENTORY_BOOKS, live)
        reading = live & (act == READ_BOOK) & (books > 0)
        unknown = bit(~flag(a8, r8, F_LEARNED_SPELLS, live), 0) | bit(~flag(a8, r8, F_LEARNED_SPELLS + 1, live), 1)
        spell = pick(unknown, 2, uniform(u_p, e64, U_SPELL, reading))
        set_ach(a8, r8, tl.where(spell == 1, A_LEARN_ICEBALL, A_LEARN_FIREBALL), reading, live)
        st8(a8, r8, F_LEARNED_SPELLS + spell, reading, reading)
        st32(a32, r32, F_INVENTORY_BOOKS, books - 1, reading)

    @triton.jit
    def _enchant(a8, a32, r8, r32, e64, live, act, u_p, lvl, px, py, dx, dy):
        """Facing a fire (ice) enchantment table, with 9 mana and a ruby (sapphire): the bow, the
        sword or an armour piece (a bare one at random, else one not of this enchantment) is
        enchanted with fire (ice)."""
        idx, _ok = cell(lvl, px + dx, py + dy)
        block = ld8(a8, r8, F_MAP + idx, live)
        fire_table = block == FIRE_TABLE
        kind = tl.where(fire_table, 1, 2)
        ruby = ld32(a32, r32, F_INVENTORY_RUBY, live)
        sapphire = ld32(a32, r32, F_INVENTORY_SAPPHIRE, live)
        mana = ld32(a32, r32, F_PLAYER_MANA, live)
        gems = tl.where(fire_table, ruby, sapphire)
        could = live & (mana >= 9) & (fire_table | (block == ICE_TABLE)) & (gems >= 1)
        bow = could & (act == ENCHANT_BOW) & (ld32(a32, r32, F_INVENTORY_BOW, live) > 0)
        sword = could & (act == ENCHANT_SWORD) & (ld32(a32, r32, F_INVENTORY_SWORD, live) > 0)
        pieces = tl.zeros_like(act)
        bare = tl.zeros_like(act)
        other = tl.zeros_like(act)
        for i in tl.static_range(4):
            pieces += ld32(a32, r32, F_INVENTORY_ARMOUR + i, live)
            ench = ld32(a32, r32, F_ARMOUR_ENCHANTMENTS + i, live)
            bare |= bit(ench == 0, i)
            other |= bit(ench != kind, i)
        armour = could & (act == ENCHANT_ARMOUR) & (pieces > 0)
        target = pick(tl.where(bare != 0, bare, other), 4, uniform(u_p, e64, U_ARMOUR, armour))
        st32(a32, r32, F_SWORD_ENCHANTMENT, kind, sword)
        st32(a32, r32, F_BOW_ENCHANTMENT, kind, bow)
        st32(a32, r32, F_ARMOUR_ENCHANTMENTS + target, kind, armour)
        enchanting = bow | sword | armour
        st32(a32, r32, F_INVENTORY_SAPPHIRE, sapphire - 1, enchanting & (kind == 2))
        st32(a32, r32, F_INVENTORY_RUBY, ruby - 1, enchanting & (kind == 1))
        st32(a32, r32, F_PLAYER_MANA, mana - 9, enchanting)
        set_ach(a8, r8, A_ENCHANT_SWORD, sword, live)
        set_ach(a8, r8, A_ENCHANT_ARMOUR, armour, live)

    @triton.jit
    def _level_up(a32, r32, live, act):
        """An experience point raises dexterity, strength or intelligence (up to 5)."""
        xp = ld32(a32, r32, F_PLAYER_XP, live)
        dex = ld32(a32, r32, F_PLAYER_DEXTERITY, live)
        strength = ld32(a32, r32, F_PLAYER_STRENGTH, live)
        intel = ld32(a32, r32, F_PLAYER_INTELLIGENCE, live)
        can = live & (xp >= 1)
        up_dex = can & (act == LEVEL_UP_DEX) & (dex < MAX_ATTRIBUTE)
        up_str = can & (act == LEVEL_UP_STR) & (strength < MAX_ATTRIBUTE)
        up_int = can & (act == LEVEL_UP_INT) & (intel < MAX_ATTRIBUTE)
        st32(a32, r32, F_PLAYER_DEXTERITY, dex + 1, up_dex)
        st32(a32, r32, F_PLAYER_STRENGTH, strength + 1, up_str)
        st32(a32, r32, F_PLAYER_INTELLIGENCE, intel + 1, up_int)
        st32(a32, r32, F_PLAYER_XP, xp - 1, up_dex | up_str | up_int)

    @triton.jit
    def _move_player(a8, a32, r8, r32, live, act, lvl, px, py):
        """A move action turns the player and moves them onto a free cell (on the map, not solid,
        water, lava or a mob's)."""
        mx, my = action_step(act)
        never = act != act
        ok = valid_move(a8, r8, lvl, px + mx, py + my, px, py, never, ~never, ~never, live)  # COLLISION_PLAYER
        st32(a32, r32, F_PLAYER_POSITION, px + mx, live & ok)
        st32(a32, r32, F_PLAYER_POSITION + 1, py + my, live & ok)
        st32(a32, r32, F_PLAYER_DIRECTION, act, live & (act >= LEFT) & (act <= DOWN))

    @triton.jit
    def front(a8, a32, af, r8, r32, e64, live, act, u_p, dirs_p):
        """:func:`.game.front` for the lanes' worlds: ``act`` the actions taken (:func:`.game.acting`'s,
        int32), ``u_p`` / ``dirs_p`` the step's draws (rows of 33 float32 / 8 int64; the dirs are
        the tail's)."""
        lvl, px, py = _change_floor(a8, a32, r8, r32, live, act)
        _craft(a8, a32, r8, r32, live, act, lvl, px, py)
        dx, dy = action_step(ld32(a32, r32, F_PLAYER_DIRECTION, live))  # the cell the player faces
        _do(a8, a32, af, r8, r32, e64, live, act, u_p, lvl, px, py, dx, dy)
        _place(a8, a32, af, r8, r32, live, act, lvl, px, py, dx, dy)
        _projectiles(a8, a32, r8, r32, live, act, lvl, px, py, dx, dy)
        _drink_potion(a8, a32, af, r8, r32, live, act)
        _read_book(a8, a32, r8, r32, e64, live, act, u_p)
        _enchant(a8, a32, r8, r32, e64, live, act, u_p, lvl, px, py, dx, dy)
        set_ach(a8, r8, A_DEFEAT_NECROMANCER, ld32(a32, r32, F_BOSS_PROGRESS, live) >= BOSS_LEVEL, live)
        _add(a32, r32, F_BOSS_TIMESTEPS_TO_SPAWN_THIS_ROUND, -1, live & (lvl == BOSS_LEVEL))
        _level_up(a32, r32, live, act)
        _move_player(a8, a32, r8, r32, live, act, lvl, px, py)

    @triton.jit
    def _front_kernel(a8, a32, af, act_p, u_p, dirs_p, n, BLOCK: tl.constexpr):  # noqa: N803
        e64, live, r8, r32 = lanes(n, BLOCK)
        act = tl.load(act_p + e64, mask=live, other=0).to(tl.int32)
        front(a8, a32, af, r8, r32, e64, live, act, u_p, dirs_p)


def run_front(s: State, act: Tensor, d: dict[str, Tensor]) -> None:
    """:func:`.game.front` on the states ``s`` in place (their arena): ``act`` the action taken
    (int64 [N], :func:`.game.acting`'s) and ``d`` the step's draws (:func:`.game.sample_draws`)."""
    launch(_front_kernel, "triton_front.run_front", s, act, d)
